package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DebianPrometheus is where Debian's "prometheus" package installs the server.
const DebianPrometheus = "/usr/bin/prometheus"

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// Dir holds prometheus.yml, the TSDB (data/) and prometheus.log. Empty
	// means a new temporary directory, removed by Stop unless KeepDir.
	Dir     string
	KeepDir bool

	// Config is a complete prometheus.yml. If empty, one is generated with
	// a single job scraping Targets every ScrapeInterval.
	Config string
	// Targets are host:port addresses (loopback) scraped at MetricsPath.
	Targets     []string
	MetricsPath string // default /metrics
	JobName     string // default "wva-test"
	// ScrapeInterval is the global scrape and evaluation interval (default 1s).
	ScrapeInterval time.Duration

	// Binary overrides the prometheus binary (default $WVA_TEST_PROMETHEUS,
	// then prometheus on PATH, then /usr/bin/prometheus).
	Binary string
	// Args are appended to the generated flags (a later flag wins).
	Args []string
	// StartTimeout bounds waiting for /-/ready (default 1 minute).
	StartTimeout time.Duration
}

// Prometheus is a running (or stopped) Prometheus server. Its address and
// data survive Stop/Start, so a client configured with URL sees an outage
// and then the same server again.
type Prometheus struct {
	// URL is http://127.0.0.1:<port>.
	URL        string
	Port       int
	Dir        string
	ConfigPath string
	LogPath    string

	bin    string
	args   []string
	opts   PrometheusOptions
	ownDir bool

	mu   sync.Mutex
	proc *process
}

// PrometheusConfig renders a minimal prometheus.yml scraping targets.
func PrometheusConfig(jobName, metricsPath string, interval time.Duration, targets []string) string {
	if jobName == "" {
		jobName = "wva-test"
	}
	if metricsPath == "" {
		metricsPath = "/metrics"
	}
	if interval <= 0 {
		interval = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", interval, interval, interval)
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: %q\n    metrics_path: %q\n    static_configs:\n      - targets: [", jobName, metricsPath)
	for i, t := range targets {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", t)
	}
	b.WriteString("]\n")
	return b.String()
}

// PrometheusBinary finds the prometheus server binary or says how to get it.
func PrometheusBinary() (string, error) {
	if b := os.Getenv(EnvPrometheus); b != "" {
		return b, nil
	}
	if b, err := exec.LookPath("prometheus"); err == nil {
		return b, nil
	}
	if _, err := os.Stat(DebianPrometheus); err == nil {
		return DebianPrometheus, nil
	}
	return "", fmt.Errorf("harness: no prometheus binary: install Debian's package with "+
		"`apt-get update && apt-get install -y prometheus` (gives %s) or set $%s", DebianPrometheus, EnvPrometheus)
}

// StartPrometheus writes the config and starts Prometheus on a free loopback
// port with --web.enable-lifecycle, then waits for /-/ready.
func StartPrometheus(ctx context.Context, opts PrometheusOptions) (_ *Prometheus, err error) {
	p := &Prometheus{opts: opts, Dir: opts.Dir, bin: opts.Binary}
	if p.bin == "" {
		if p.bin, err = PrometheusBinary(); err != nil {
			return nil, err
		}
	}
	if p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "wva-prometheus-"); err != nil {
			return nil, err
		}
		p.ownDir = true
	} else if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, err
	}
	if p.Dir, err = filepath.Abs(p.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.opts.KeepDir = true // keep the log named in err
			p.Close()
			err = fmt.Errorf("%w\n(prometheus dir kept: %s)", err, p.Dir)
		}
	}()
	cfg := opts.Config
	if cfg == "" {
		cfg = PrometheusConfig(opts.JobName, opts.MetricsPath, opts.ScrapeInterval, opts.Targets)
	}
	p.ConfigPath = filepath.Join(p.Dir, "prometheus.yml")
	if err := os.WriteFile(p.ConfigPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if p.Port, err = FreePort(); err != nil {
		return nil, err
	}
	p.URL = "http://" + hostPort(p.Port)
	p.LogPath = filepath.Join(p.Dir, "prometheus.log")
	p.args = []string{
		"--config.file=" + p.ConfigPath,
		"--storage.tsdb.path=" + filepath.Join(p.Dir, "data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=" + hostPort(p.Port),
		"--web.enable-lifecycle",
		"--log.level=info",
	}
	p.args = append(p.args, opts.Args...)
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// StartPrometheusT is StartPrometheus for tests: it fails t on error and
// closes the server with t.Cleanup (keeping the directory and logging the
// log tail if the test failed).
func StartPrometheusT(t testing.TB, opts PrometheusOptions) *Prometheus {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	p, err := StartPrometheus(ctx, opts)
	if err != nil {
		t.Fatalf("harness.StartPrometheus: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			p.opts.KeepDir = true
			p.mu.Unlock()
			t.Logf("harness: test failed; prometheus dir kept: %s\n--- %s ---\n%s", p.Dir, p.LogPath, tailFile(p.LogPath, 25))
		}
		p.Close()
	})
	return p
}

// Start (re)starts a stopped Prometheus on the same port, config and data
// directory, and waits for /-/ready. It is a no-op if it is running. The
// first scrape comes about 5s after a start (Prometheus batches target
// discovery updates every 5s).
func (p *Prometheus) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		if done, _ := p.proc.exited(); !done {
			return nil
		}
	}
	timeout := p.opts.StartTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	proc, err := startProcess("prometheus", p.Dir, p.bin, p.args)
	if err != nil {
		return err
	}
	p.proc = proc
	if err := waitReady(ctx, proc, &http.Client{Timeout: 5 * time.Second}, p.URL+"/-/ready", status2xx); err != nil {
		proc.stop(0)
		return err
	}
	return nil
}

// Stop stops Prometheus gracefully (SIGTERM, then SIGKILL after 10s). The
// port stays unserved until Start; data and config are kept.
func (p *Prometheus) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proc.stop(10 * time.Second)
}

// Kill stops Prometheus with SIGKILL at once (a crash).
func (p *Prometheus) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proc.stop(0)
}

// Running reports whether the process is alive.
func (p *Prometheus) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return false
	}
	done, _ := p.proc.exited()
	return !done
}

// Close stops Prometheus and removes Dir if StartPrometheus created it (and
// KeepDir is not set).
func (p *Prometheus) Close() {
	p.mu.Lock()
	proc, keep := p.proc, p.opts.KeepDir
	p.mu.Unlock()
	proc.stop(5 * time.Second)
	if p.ownDir && !keep {
		_ = os.RemoveAll(p.Dir)
	}
}

// Reload writes a new prometheus.yml (if config is not empty) and asks the
// running server to reload it (POST /-/reload).
func (p *Prometheus) Reload(ctx context.Context, config string) error {
	if config != "" {
		if err := os.WriteFile(p.ConfigPath, []byte(config), 0o644); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("harness: prometheus reload: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// Sample is one element of an instant-vector query result.
type Sample struct {
	Metric map[string]string
	Time   time.Time
	Value  float64
}

// Query runs an instant query (GET /api/v1/query) and returns the vector.
// A scalar result comes back as one sample without labels.
func (p *Prometheus) Query(ctx context.Context, promql string) ([]Sample, error) {
	u := p.URL + "/api/v1/query?" + url.Values{"query": {promql}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("harness: prometheus query: HTTP %d: %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("harness: prometheus query %q: %s", promql, r.Error)
	}
	parse := func(v [2]any) (time.Time, float64, error) {
		ts, _ := v[0].(float64)
		s, _ := v[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		return time.UnixMilli(int64(ts * 1000)), f, err
	}
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(vec))
		for _, s := range vec {
			ts, f, err := parse(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Metric: s.Metric, Time: ts, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, err
		}
		ts, f, err := parse(v)
		if err != nil {
			return nil, err
		}
		return []Sample{{Time: ts, Value: f}}, nil
	default:
		return nil, errors.New("harness: unsupported result type " + r.Data.ResultType)
	}
}
