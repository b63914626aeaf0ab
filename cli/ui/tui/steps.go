package tui

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
)

// Steps shows the steps of a long wait (install --wait, uninstall): the
// running step with a spinner and the time spent, finished steps as ✓
// lines. Each step that lasts is its own short inline program, so what the
// command prints between steps never fights with a live screen.
//
// The screen reads the keyboard while it runs (bubbletea needs raw mode to
// keep typed keys from breaking the layout); Ctrl-C there is passed on as
// SIGINT, so it interrupts the command as it would without the screen.
type Steps struct {
	In  io.Reader
	Out io.Writer
	// Delay: a step shows its spinner only after this long (default 300ms);
	// quicker steps print just their ✓ line, with no screen and no flicker.
	Delay time.Duration
	// Interrupt is what Ctrl-C does; nil sends SIGINT to this process.
	Interrupt func()

	// programOptions are for tests.
	programOptions []tea.ProgramOption

	mu      sync.Mutex
	step    string
	started time.Time
	timer   *time.Timer
	prog    *tea.Program
	shown   time.Time // when the program started
	done    chan struct{}
}

// minShown keeps a started screen up long enough for the terminal's
// answers to bubbletea's start-up queries to arrive while it still reads
// the keyboard; answers that came later would be typed into the shell.
const minShown = 250 * time.Millisecond

type (
	stepDoneMsg struct{ line string }
	stepModel   struct {
		step      string
		started   time.Time
		spinner   spinner.Model
		final     string
		width     int
		interrupt func()
	}
)

func (m stepModel) Init() tea.Cmd { return m.spinner.Tick }

func (m stepModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case spinner.TickMsg:
		if m.final == "" {
			var cmd tea.Cmd
			m.spinner, cmd = m.spinner.Update(msg)
			return m, cmd
		}
	case stepDoneMsg:
		m.final = msg.line
		return m, tea.Quit
	case tea.KeyPressMsg:
		if msg.String() == "ctrl+c" && m.interrupt != nil {
			interrupt := m.interrupt
			return m, func() tea.Msg { interrupt(); return nil }
		}
	}
	return m, nil
}

func (m stepModel) View() tea.View {
	w := m.width
	if w == 0 {
		w = defaultWidth
	}
	if m.final != "" {
		// The trailing newline leaves the cursor below the line when the
		// program ends; without it the next output overwrites the line.
		return tea.NewView(wrap(m.final, w) + "\n")
	}
	return tea.NewView(wrap(m.spinner.View()+" "+m.step+dimStyle.Render(" ("+elapsed(time.Since(m.started))+")"), w))
}

func (s *Steps) interrupt() {
	if s.Interrupt != nil {
		s.Interrupt()
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(os.Interrupt)
	}
}

// Step implements progress.Reporter.
func (s *Steps) Step(msg string) {
	s.end(dimStyle.Render("• " + s.currentStep()))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step, s.started = msg, time.Now()
	delay := s.Delay
	if delay == 0 {
		delay = 300 * time.Millisecond
	}
	step := msg
	s.timer = time.AfterFunc(delay, func() { s.show(step) })
}

func (s *Steps) currentStep() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// show starts the screen for a step that is taking a while.
func (s *Steps) show(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step != step || s.prog != nil {
		return // already done
	}
	m := stepModel{step: step, started: s.started, interrupt: s.interrupt,
		spinner: spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(spinnerStyle))}
	opts := append([]tea.ProgramOption{tea.WithInput(s.In), tea.WithOutput(s.Out), tea.WithoutSignalHandler()}, s.programOptions...)
	prog := tea.NewProgram(m, opts...)
	done := make(chan struct{})
	s.prog, s.done, s.shown = prog, done, time.Now()
	go func() {
		defer close(done)
		if _, err := prog.Run(); err != nil {
			// The screen could not start; the ✓ line still comes from end.
			return
		}
	}()
}

// end finishes the running step (if any) with line as its last word.
func (s *Steps) end(line string) {
	s.mu.Lock()
	if s.step == "" {
		s.mu.Unlock()
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	prog, done, shown := s.prog, s.done, s.shown
	s.step, s.prog, s.done, s.timer = "", nil, nil, nil
	s.mu.Unlock()
	if prog == nil {
		fmt.Fprintln(s.Out, line)
		return
	}
	if wait := minShown - time.Since(shown); wait > 0 {
		time.Sleep(wait)
	}
	prog.Send(stepDoneMsg{line})
	<-done
}

// Done implements progress.Reporter.
func (s *Steps) Done(msg string) {
	s.mu.Lock()
	started, running := s.started, s.step != ""
	s.mu.Unlock()
	if !running {
		fmt.Fprintln(s.Out, okStyle.Render("✓ ")+msg)
		return
	}
	s.end(okStyle.Render("✓ ") + msg + dimStyle.Render(fmt.Sprintf(" (%.1fs)", time.Since(started).Seconds())))
}

// Close ends a step left running (the command failed or was interrupted)
// and gives the terminal back; the command's error follows.
func (s *Steps) Close() {
	s.mu.Lock()
	step, started := s.step, s.started
	s.mu.Unlock()
	if step == "" {
		return
	}
	s.end(dimStyle.Render(fmt.Sprintf("• %s (stopped after %s)", step, elapsed(time.Since(started)))))
}
