package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// process is one child process whose stdout and stderr go to a log file.
// It runs in its own process group (killed as a group) and, on Linux, gets
// SIGKILL when the test process dies (Pdeathsig).
type process struct {
	name    string
	logPath string

	cmd  *exec.Cmd
	done chan struct{}

	mu      sync.Mutex
	waitErr error
}

// startProcess starts bin with args. Output is appended to dir/<name>.log,
// preceded by the command line.
func startProcess(name, dir, bin string, args []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "### %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after grace.
// A grace of zero kills at once. Safe to call more than once.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if done, _ := p.exited(); done {
		return
	}
	if grace > 0 {
		signalGroup(p.cmd, false)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	signalGroup(p.cmd, true)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// tail returns the last lines of the process log.
func (p *process) tail() string { return tailFile(p.logPath, 40) }

// failure builds an error for a process that failed to come up, with the
// tail of its log.
func (p *process) failure(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if done, err := p.exited(); done {
		msg += fmt.Sprintf(" (process exited: %v)", err)
	}
	return fmt.Errorf("%s: %s\n--- last lines of %s ---\n%s", p.name, msg, p.logPath, p.tail())
}

// tailFile returns at most n last lines (and at most 16 KiB) of a file.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 16 << 10
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a process to listen on.
//
// Ports come from below the kernel's ephemeral range (ip_local_port_range):
// a port picked with ":0" and released can be taken as the source port of
// an outgoing connection before the process binds it, which tests running
// in parallel (many connections) hit. Each test binary walks the range from
// a random start, so concurrent binaries stay apart, and each port is
// checked free before it is handed out.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// firstPort is the low end of the ports handed out; below it sit ports
// daemons commonly use.
const firstPort = 15000

var portWalk struct {
	once   sync.Once
	lo, hi int // [lo, hi); hi <= lo: use ":0"
	next   atomic.Int64
}

func freePorts(n int) ([]int, error) {
	portWalk.once.Do(func() {
		portWalk.lo, portWalk.hi = firstPort, ephemeralLow()
		if portWalk.hi > portWalk.lo {
			portWalk.next.Store(rand.Int64N(int64(portWalk.hi - portWalk.lo)))
		}
	})
	lo, hi := portWalk.lo, portWalk.hi
	ports := make([]int, 0, n)
	if hi <= lo { // an unusual ephemeral range: let the kernel choose
		for range n {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			defer l.Close() // held until all are chosen, so they differ
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		}
		return ports, nil
	}
	for tries := 0; len(ports) < n; tries++ {
		if tries > hi-lo {
			return nil, fmt.Errorf("harness: no free port in [%d, %d)", lo, hi)
		}
		port := lo + int(portWalk.next.Add(1)%int64(hi-lo))
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			continue // taken
		}
		l.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitReady polls url with client until check accepts the response, the
// process exits, or ctx ends.
func waitReady(ctx context.Context, p *process, client *http.Client, url string, check func(code int, body []byte) bool) error {
	var last string
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if done, _ := p.exited(); done {
			return p.failure("exited before %s was ready", url)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if check(resp.StatusCode, body) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return p.failure("not ready at %s: %v; last answer: %s", url, context.Cause(ctx), last)
		case <-p.done:
		case <-tick.C:
		}
	}
}

func status2xx(code int, _ []byte) bool { return code >= 200 && code < 300 }

// insecureClient is used only to probe health endpoints on loopback.
func insecureClient() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health probe
			Proxy:           nil,
		},
	}
}
