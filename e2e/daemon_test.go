package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// binary is the agentd built once for every test of this package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "agentd")
	build := exec.Command("go", "build", "-o", binary, "github.com/agentd/agentd/cmd/agentd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build agentd:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// daemonConfig is what the yaml of a subprocess daemon says.
type daemonConfig struct {
	FakeURL string
	Window  int
	DataDir string
	Port    int
	// Limits is yaml appended under limits: (indented two spaces).
	Limits map[string]string
	// Providers, when set, is the yaml of the providers (a providers: list
	// and default_model) in place of the fake's.
	Providers string
	// Extra is top-level yaml appended as it is (mcp_servers: …).
	Extra string
	// Env is added to the daemon's environment (KEY=value).
	Env []string
}

func (c daemonConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:%d\ndata_dir: %s\nlog_level: warn\n", c.Port, c.DataDir)
	if c.Providers != "" {
		b.WriteString(c.Providers)
	} else {
		fmt.Fprintf(&b, "default_model: fake/m\nproviders:\n  - name: fake\n    kind: openai\n    company: vllm\n    base_url: %s\n    models:\n      - id: m\n        window: %d\n", c.FakeURL, c.Window)
	}
	b.WriteString(c.Extra)
	b.WriteString("limits:\n")
	// These tests were written for chats that fill their window and fold
	// as lines.
	for k, v := range map[string]string{"compact_threshold": "-1", "fold_as_lines": "true"} {
		if _, ok := c.Limits[k]; !ok {
			fmt.Fprintf(&b, "  %s: %s\n", k, v)
		}
	}
	for k, v := range c.Limits {
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	return b.String()
}

// daemon is one agentd subprocess on a fixed data folder and port, which
// can be killed and started again.
type daemon struct {
	t      testing.TB
	cfg    daemonConfig
	path   string // the yaml file
	runs   int
	cmd    *exec.Cmd
	exited chan struct{}
	logs   []string // one log file per run
	Client *api.Client
}

// freePort asks the kernel for a loopback port nobody uses now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func newDaemon(t testing.TB, cfg daemonConfig) *daemon {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Port == 0 {
		cfg.Port = freePort(t)
	}
	d := &daemon{t: t, cfg: cfg, path: filepath.Join(cfg.DataDir, "agentd.yaml")}
	if err := os.WriteFile(d.path, []byte(cfg.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	d.Client = &api.Client{BaseURL: fmt.Sprintf("http://127.0.0.1:%d", cfg.Port), HTTP: &http.Client{Transport: transport}}
	t.Cleanup(func() {
		d.kill()
		transport.CloseIdleConnections()
	})
	return d
}

// start runs the binary and waits until /healthz answers.
func (d *daemon) start() {
	d.t.Helper()
	d.runs++
	logPath := filepath.Join(d.cfg.DataDir, fmt.Sprintf("run-%03d.log", d.runs))
	logf, err := os.Create(logPath)
	if err != nil {
		d.t.Fatal(err)
	}
	d.logs = append(d.logs, logPath)
	cmd := exec.Command(binary, "serve", "--config", d.path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(os.Environ(), "AGENTD_CONFIG="), d.cfg.Env...)
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	d.cmd, d.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			d.t.Fatalf("agentd exited while starting (run %d): %s", d.runs, d.logTail(40))
		default:
		}
		resp, err := d.Client.HTTP.Get(d.Client.BaseURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("agentd did not answer /healthz within 30s: %v; %s", err, d.logTail(40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the daemon and waits for it to be gone.
func (d *daemon) kill() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.cmd = nil
}

// term sends SIGTERM and waits up to limit for the process to exit; it
// reports whether it exited on its own and its exit status.
func (d *daemon) term(limit time.Duration) (exited bool, state *os.ProcessState) {
	cmd := d.cmd
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		d.cmd = nil
		return true, cmd.ProcessState
	case <-time.After(limit):
		d.kill()
		return false, cmd.ProcessState
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// logTail returns the last n lines of the current run's log.
func (d *daemon) logTail(n int) string {
	if len(d.logs) == 0 {
		return "(no log)"
	}
	b, _ := os.ReadFile(d.logs[len(d.logs)-1])
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "log " + d.logs[len(d.logs)-1] + ":\n" + strings.Join(lines, "\n")
}

// panics counts "panic:" and "fatal error:" lines in every run's log.
func (d *daemon) panics() (int, string) {
	n, first := 0, ""
	for _, p := range d.logs {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.Contains(l, "DATA RACE") {
				n++
				if first == "" {
					first = p + ": " + l
				}
			}
		}
		f.Close()
	}
	return n, first
}

var rssLine = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`)

// rssKB reads the resident set of a process from /proc.
func rssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	m := rssLine.FindSubmatch(b)
	if m == nil {
		return 0, errors.New("no VmRSS line")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// resultsMu serialises writes to RESULTS.md by the tests of this package.
var resultsMu sync.Mutex

// writeResults logs a test's figures and, when AGENTD_WRITE_RESULTS is set,
// replaces the section named name of RESULTS.md (between "<!-- name -->"
// and "<!-- /name -->") with them, so a plain test run leaves the checkout
// as it was.
func writeResults(t testing.TB, name, body string) {
	t.Logf("%s figures:\n%s", name, body)
	if os.Getenv("AGENTD_WRITE_RESULTS") == "" {
		return
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	const file = "RESULTS.md"
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read %s: %v", file, err)
		return
	}
	if len(old) == 0 {
		old = []byte("# agentd end-to-end figures\n\nWritten by the tests in this folder (go test ./e2e/); copy into BENCHMARKS.md.\n")
	}
	open, closing := "<!-- "+name+" -->", "<!-- /"+name+" -->"
	section := open + "\n" + strings.TrimSpace(body) + "\n" + closing
	var out []byte
	if i, j := bytes.Index(old, []byte(open)), bytes.Index(old, []byte(closing)); i >= 0 && j > i {
		out = append(append(append([]byte{}, old[:i]...), section...), old[j+len(closing):]...)
	} else {
		out = append(append(bytes.TrimRight(old, "\n"), "\n\n"...), section...)
		out = append(out, '\n')
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Errorf("write %s: %v", file, err)
	}
}

// sendTimeout bounds one message's stream in these tests; a turn through
// the fake takes milliseconds, so hitting it means the daemon hung.
const sendTimeout = 60 * time.Second

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
