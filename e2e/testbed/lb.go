package testbed

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// runLBController is the bed's LoadBalancer provider, in the manner of cloud-provider-kind:
// every Service of type LoadBalancer gets status.loadBalancer.ingress[0].ip from the bed's
// LB range; kube-proxy then programs that IP, which the bed routes onto the node bridge.
// It polls (1 s) rather than watches: a test bed has a handful of Services.
func runLBController(ctx context.Context, kubeconfig, cidr string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return fmt.Errorf("LB range %q: %w", cidr, err)
	}
	for {
		if err := reconcileLBs(ctx, cs, ipnet); err != nil {
			fmt.Fprintf(os.Stderr, "%s lb-controller: %v\n", time.Now().Format(time.RFC3339), err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func reconcileLBs(ctx context.Context, cs kubernetes.Interface, ipnet *net.IPNet) error {
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	used := map[string]bool{}
	var pending []corev1.Service
	for _, s := range svcs.Items {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			used[s.Status.LoadBalancer.Ingress[0].IP] = true
			continue
		}
		pending = append(pending, s)
	}
	for i := range pending {
		s := &pending[i]
		ip := freeIP(ipnet, used)
		if ip == "" {
			return fmt.Errorf("LB range %s exhausted; Service %s/%s stays pending", ipnet, s.Namespace, s.Name)
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if _, err := cs.CoreV1().Services(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("assign %s to Service %s/%s: %w", ip, s.Namespace, s.Name, err)
		}
		used[ip] = true
		fmt.Fprintf(os.Stderr, "%s lb-controller: Service %s/%s -> %s\n", time.Now().Format(time.RFC3339), s.Namespace, s.Name, ip)
	}
	return nil
}

// freeIP returns the first unused address of the range, skipping the network address.
func freeIP(ipnet *net.IPNet, used map[string]bool) string {
	base := ipnet.IP.To4()
	ones, bits := ipnet.Mask.Size()
	n := 1 << (bits - ones)
	for i := 1; i < n-1; i++ {
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, binary.BigEndian.Uint32(base)+uint32(i)) //nolint:gosec // G115: i < 2^(32-ones)
		if !used[ip.String()] {
			return ip.String()
		}
	}
	return ""
}
