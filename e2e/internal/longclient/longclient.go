// Package longclient is a long-lived Kubernetes client written the way k9s,
// Lens or Headlamp are: one rest.Config, one clientset, and every kind of
// long-lived connection a person keeps open in them at once. Run reports
// every time one of them is cut, so an e2e test can show that credential
// renewals cut nothing (or, on a build that has the bug, that they do).
//
// It knows nothing of how the credentials are made: the rest.Config carries
// them (an exec plugin, a token), and the caller decides when the run ends.
package longclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// Options says where the client works.
type Options struct {
	// Namespace is where the client watches and writes ConfigMaps; its user
	// must be allowed to get pods, read their logs, exec and port-forward
	// there, and to create, patch and delete ConfigMaps.
	Namespace string
	// Pod runs `testserver ticker` (e2e/internal/testserver): one log line a
	// second, HTTP on Port, and `testserver cat` to exec.
	Pod  string
	Port int
	// Logf, if set, gets one line per cut as it happens.
	Logf func(format string, args ...any)
}

// Cut is one long-lived thing that stopped working: what, when, and why.
type Cut struct {
	At     time.Time
	Stream string
	Reason string
}

// Report is what a run saw.
type Report struct {
	Start, End time.Time
	Cuts       []Cut
	// Progress counts, per stream, the units of work that succeeded (watch
	// events, log lines, echoed exec lines, GETs), to show every stream ran.
	Progress map[string]int
}

func (c Cut) String() string { return fmt.Sprintf("%s: %s", c.Stream, c.Reason) }

// Summary is the report in a few lines, cut times relative to the start.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ran %s; %d cuts", r.End.Sub(r.Start).Round(time.Second), len(r.Cuts))
	for _, c := range r.Cuts {
		fmt.Fprintf(&b, "\n  +%s %s", c.At.Sub(r.Start).Round(100*time.Millisecond), c)
	}
	fmt.Fprintf(&b, "\n  progress: %v", r.Progress)
	return b.String()
}

// How often the client does something on each stream, and how long a
// stream may show no progress before it counts as cut: a connection closed
// under a stream does not always surface as an error (a half-closed tunnel,
// a watch whose server went away), but it always stops the progress.
const (
	getEvery   = 3 * time.Second
	pingEvery  = 5 * time.Second
	stallAfter = 20 * time.Second
	reopenWait = time.Second
)

// Stream names, as they appear in a Report.
const (
	StreamWatch        = "watch configmaps"
	StreamHeartbeat    = "configmap writes"
	StreamLogs         = "logs -f"
	StreamExecWS       = "exec (WebSocket)"
	StreamExecSPDY     = "exec (SPDY)"
	StreamForwardWS    = "port-forward (WebSocket)"
	StreamForwardSPDY  = "port-forward (SPDY)"
	StreamGet          = "GET pod"
	heartbeatConfigMap = "longclient-heartbeat"
)

// Run opens everything on cfg and keeps it open until ctx ends, reopening
// whatever is cut (as a person's client would) and recording each cut. It
// returns an error only if the client could not start (a stream that
// cannot be opened once is a setup problem, not a cut).
func Run(ctx context.Context, cfg *rest.Config, o Options) (*Report, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a clientset from the rest.Config: %w", err)
	}
	r := &recorder{logf: o.Logf, progress: map[string]int{}, start: time.Now(), stall: stallAfter}
	c := &client{cs: cs, cfg: cfg, o: o, r: r}
	if err := c.setup(ctx); err != nil {
		return nil, err
	}
	defer c.cleanup()

	streams := map[string]func(context.Context, func()) error{
		StreamWatch:       c.watch,
		StreamHeartbeat:   c.heartbeat,
		StreamLogs:        c.logs,
		StreamExecWS:      c.exec(true),
		StreamExecSPDY:    c.exec(false),
		StreamForwardWS:   c.forward(true),
		StreamForwardSPDY: c.forward(false),
		StreamGet:         c.get,
	}
	var wg sync.WaitGroup
	for name, open := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); r.keep(ctx, name, open) }()
	}
	wg.Wait()
	return r.report(), nil
}

// recorder keeps the cuts and the progress, and runs each stream.
type recorder struct {
	logf     func(string, ...any)
	start    time.Time
	stall    time.Duration
	mu       sync.Mutex
	cuts     []Cut
	progress map[string]int
}

func (r *recorder) cut(stream, reason string) {
	c := Cut{At: time.Now(), Stream: stream, Reason: reason}
	r.mu.Lock()
	r.cuts = append(r.cuts, c)
	r.mu.Unlock()
	if r.logf != nil {
		r.logf("longclient: +%s cut: %s", c.At.Sub(r.start).Round(100*time.Millisecond), c)
	}
}

func (r *recorder) report() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{Start: r.start, End: time.Now(), Cuts: append([]Cut(nil), r.cuts...), Progress: map[string]int{}}
	for k, v := range r.progress {
		rep.Progress[k] = v
	}
	return rep
}

// keep runs open until ctx ends. open runs one stream until it fails,
// calling alive at each unit of progress; whatever makes it return before
// ctx ends (an error, a clean end, no progress for r.stall) is a cut,
// and the stream is opened again.
func (r *recorder) keep(ctx context.Context, name string, open func(context.Context, func()) error) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		var mu sync.Mutex
		last, stalled := time.Now(), false
		alive := func() {
			mu.Lock()
			last = time.Now()
			mu.Unlock()
			r.mu.Lock()
			r.progress[name]++
			r.mu.Unlock()
		}
		go func() {
			t := time.NewTicker(r.stall / 10)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
					mu.Lock()
					idle := time.Since(last)
					stalled = idle > r.stall
					mu.Unlock()
					if idle > r.stall {
						cancel()
						return
					}
				}
			}
		}()
		err := open(sctx, alive)
		cancel()
		if ctx.Err() != nil {
			return // the run ended: not a cut
		}
		mu.Lock()
		wasStalled := stalled
		mu.Unlock()
		switch {
		case wasStalled:
			r.cut(name, fmt.Sprintf("no progress for %s", r.stall))
		case err != nil:
			r.cut(name, err.Error())
		default:
			r.cut(name, "ended")
		}
		select {
		case <-ctx.Done():
		case <-time.After(reopenWait):
		}
	}
}

type client struct {
	cs  kubernetes.Interface
	cfg *rest.Config
	o   Options
	r   *recorder
}

// setup checks, once, that everything the streams need is there, so that a
// missing permission or pod fails the run at once instead of looking like
// a stream cut again and again.
func (c *client) setup(ctx context.Context) error {
	pod, err := c.cs.CoreV1().Pods(c.o.Namespace).Get(ctx, c.o.Pod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s/%s as the client's user: %w", c.o.Namespace, c.o.Pod, err)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s/%s is %s, not Running: wait for it before starting the client", c.o.Namespace, c.o.Pod, pod.Status.Phase)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: heartbeatConfigMap}, Data: map[string]string{"n": "0"}}
	_, err = c.cs.CoreV1().ConfigMaps(c.o.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ConfigMap %s/%s as the client's user: %w", c.o.Namespace, heartbeatConfigMap, err)
	}
	return nil
}

// cleanup removes what setup created; the run's context is over by then.
func (c *client) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.cs.CoreV1().ConfigMaps(c.o.Namespace).Delete(ctx, heartbeatConfigMap, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) && c.r.logf != nil {
		c.r.logf("longclient: delete ConfigMap %s/%s: %v (the namespace's deletion removes it)", c.o.Namespace, heartbeatConfigMap, err)
	}
}

// every calls f at once and then every d until ctx ends or f fails.
func every(ctx context.Context, d time.Duration, f func() error) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := f(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watch is a ConfigMap watch; the heartbeat's writes give it an event every
// few seconds.
func (c *client) watch(ctx context.Context, alive func()) error {
	// A long timeout: the API server ends a watch at the timeout it is given
	// (else 30 to 60 minutes), and that end must not look like a cut.
	timeout := int64(time.Hour / time.Second)
	w, err := c.cs.CoreV1().ConfigMaps(c.o.Namespace).Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the result channel closed")
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("an error event: %w", apierrors.FromObject(ev.Object))
			}
			alive()
		}
	}
}

func (c *client) heartbeat(ctx context.Context, alive func()) error {
	return every(ctx, pingEvery, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// A value never written before, so that every write is an event.
		patch := fmt.Sprintf(`{"data":{"n":"%d"}}`, time.Now().UnixNano())
		_, err := c.cs.CoreV1().ConfigMaps(c.o.Namespace).Patch(rctx, heartbeatConfigMap, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patch: %w", err)
		}
		alive()
		return nil
	})
}

func (c *client) logs(ctx context.Context, alive func()) error {
	tail := int64(1)
	s, err := c.cs.CoreV1().Pods(c.o.Namespace).GetLogs(c.o.Pod, &corev1.PodLogOptions{Follow: true, TailLines: &tail}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	sc := bufio.NewScanner(s)
	for sc.Scan() {
		alive()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return errors.New("the log stream ended (EOF)")
}

func (c *client) podURL(sub string, params *corev1.PodExecOptions) *url.URL {
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.o.Namespace).Name(c.o.Pod).SubResource(sub)
	if params != nil {
		req = req.VersionedParams(params, scheme.ParameterCodec)
	}
	return req.URL()
}

// exec runs `testserver cat` in the pod and writes a line every pingEvery,
// expecting it back.
func (c *client) exec(websocket bool) func(context.Context, func()) error {
	return func(ctx context.Context, alive func()) error {
		u := c.podURL("exec", &corev1.PodExecOptions{Command: []string{"testserver", "cat"}, Stdin: true, Stdout: true, Stderr: true})
		var ex remotecommand.Executor
		var err error
		if websocket {
			ex, err = remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
		} else {
			ex, err = remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
		}
		if err != nil {
			return fmt.Errorf("executor: %w", err)
		}
		stdinR, stdinW := io.Pipe()
		stdoutR, stdoutW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdoutW, Stderr: io.Discard})
			_ = stdoutW.CloseWithError(io.EOF)
			done <- err
		}()
		// Whatever ends this stream, the writer and reader end with it.
		defer func() { _ = stdinW.Close(); _ = stdoutR.Close() }()
		echoes := make(chan string)
		go func() {
			defer close(echoes)
			sc := bufio.NewScanner(stdoutR)
			for sc.Scan() {
				select {
				case echoes <- sc.Text():
				case <-ctx.Done():
					return
				}
			}
		}()
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			want := fmt.Sprintf("ping %d", n)
			go func() { _, _ = io.WriteString(stdinW, want+"\n") }()
			select {
			case <-ctx.Done():
				return nil
			case err := <-done:
				if err == nil {
					return errors.New("the session ended")
				}
				return err
			case got, ok := <-echoes:
				if !ok {
					return errors.New("stdout ended")
				}
				if got != want {
					return fmt.Errorf("echoed %q, want %q", got, want)
				}
				alive()
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-done:
				if err == nil {
					return errors.New("the session ended")
				}
				return err
			case <-t.C:
			}
		}
	}
}

// forward forwards a local port to the pod's and GETs through it every
// pingEvery, each GET on a new connection (a new stream in the tunnel).
func (c *client) forward(websocket bool) func(context.Context, func()) error {
	return func(ctx context.Context, alive func()) error {
		u := c.podURL("portforward", nil)
		d, err := c.dialer(u, websocket)
		if err != nil {
			return fmt.Errorf("dialer: %w", err)
		}
		stop, ready := make(chan struct{}), make(chan struct{})
		fw, err := portforward.NewOnAddressesForStreaming(d, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", c.o.Port)}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			return fmt.Errorf("forwarder: %w", err)
		}
		done := make(chan error, 1)
		go func() { done <- fw.ForwardPorts() }()
		defer func() {
			close(stop)
			<-done //nolint:errcheck // its error was reported below, or it is the stop's
		}()
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err // for the deferred wait
			return fmt.Errorf("open: %w", err)
		case <-ready:
		}
		ports, err := fw.GetPorts()
		if err != nil {
			return fmt.Errorf("the forwarded port: %w", err)
		}
		if len(ports) != 1 {
			return fmt.Errorf("forwarded %d ports, want 1", len(ports))
		}
		httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		target := fmt.Sprintf("http://127.0.0.1:%d/longclient", ports[0].Local)
		getErr := make(chan error, 1)
		go func() {
			getErr <- every(ctx, pingEvery, func() error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
				if err != nil {
					return err
				}
				resp, err := httpc.Do(req)
				if err != nil {
					return fmt.Errorf("GET through the forward: %w", err)
				}
				body, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil {
					return fmt.Errorf("GET through the forward: read the body: %w", err)
				}
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello through port-forward") {
					return fmt.Errorf("GET through the forward: %s %q", resp.Status, body)
				}
				alive()
				return nil
			})
		}()
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err
			if err == nil {
				return errors.New("the forward ended")
			}
			return err
		case err := <-getErr:
			return err
		}
	}
}

func (c *client) get(ctx context.Context, alive func()) error {
	return every(ctx, getEvery, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.cs.CoreV1().Pods(c.o.Namespace).Get(rctx, c.o.Pod, metav1.GetOptions{}); err != nil {
			return err
		}
		alive()
		return nil
	})
}

// dialer is port-forward's connection: SPDY (an upgraded HTTP/1.1
// connection) or SPDY tunnelled through a WebSocket (kubectl's default
// since 1.31).
func (c *client) dialer(u *url.URL, websocket bool) (httpstream.Dialer, error) {
	if websocket {
		return portforward.NewSPDYOverWebsocketDialerForStreaming(u, c.cfg)
	}
	rt, upgrader, err := spdy.RoundTripperFor(c.cfg)
	if err != nil {
		return nil, err
	}
	return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, u), nil
}
