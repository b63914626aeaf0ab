// Command fullscreen is a full-screen terminal client for the e2e tests,
// standing in for k9s: it draws its own screen (the alternate screen, as
// k9s does) and asks the cluster who it is every second, through client-go
// and the kubeconfig's exec plugin, which kubectl-like clients run with
// their own terminal as the plugin's stderr. Whatever the plugin writes
// there is drawn over the client's screen; the test reads the screen. A
// failed call's error goes to ERRORS (a file), not the screen, where it
// would count as foreign text.
//
//	fullscreen KUBECONFIG ERRORS
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	tea "charm.land/bubbletea/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type model struct {
	client        kubernetes.Interface
	errors        *os.File
	calls, failed int
	last          string
}

type tick struct{}

type answered struct {
	who string
	err error
}

func (m model) Init() tea.Cmd { return m.ask }

// ask is one call through the exec plugin's credential.
func (m model) ask() tea.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := m.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return answered{err: err}
	}
	return answered{who: r.Status.UserInfo.Username}
}

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		if msg.String() == "q" || msg.String() == "ctrl+c" {
			return m, tea.Quit
		}
	case answered:
		m.calls++
		if msg.err != nil {
			m.failed++
			m.last = "error"
			_, _ = fmt.Fprintf(m.errors, "%s call %d: %v\n", time.Now().UTC().Format(time.RFC3339Nano), m.calls, msg.err)
		} else {
			m.last = "ok " + msg.who
		}
		return m, tea.Tick(time.Second, func(time.Time) tea.Msg { return tick{} })
	case tick:
		return m, m.ask
	}
	return m, nil
}

func (m model) View() tea.View {
	v := tea.NewView(fmt.Sprintf("FULLSCREEN CLIENT\ncalls %d failed %d\nlast %s\n", m.calls, m.failed, m.last))
	v.AltScreen = true
	return v
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fullscreen KUBECONFIG ERRORS")
		os.Exit(2)
	}
	errs, err := os.OpenFile(os.Args[2], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600) //nolint:gosec // G703: the path the test gives, in its own directory
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer errs.Close()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := tea.NewProgram(model{client: client, errors: errs}).Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
