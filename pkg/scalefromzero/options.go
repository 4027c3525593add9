package scalefromzero

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wva-project/wva/pkg/budget"
	"github.com/wva-project/wva/pkg/daemon"
)

// Options are `wva scale-from-zero`'s flags.
type Options struct {
	Kubeconfig     string
	KubeAPIQPS     float32
	KubeAPIBurst   int
	WatchNamespace string

	PollInterval        time.Duration
	ScrapeTimeout       time.Duration
	MaxConcurrentScrape int
	EPPSelector         string
	EPPMetricsPort      int
	EPPMetricsPath      string
	EPPScheme           string
	EPPInsecureTLS      bool
	EPPCAFile           string
	EPPTLSServerName    string
	EPPBearerTokenFile  string
	EPPURLs             []string

	WakeTimeout time.Duration
	RetryAfter  time.Duration

	ConfigNamespace   string
	Budget            budget.Flags
	BudgetGaugesEvery time.Duration

	ActivatorListen     string
	ActivatorBackends   []string
	ActivatorMaxWait    time.Duration
	ActivatorHealthPath string
	// Memory bounds of the activator: requests held for a model at once,
	// request bodies in memory at once, and one request's body.
	ActivatorMaxHeldRequests int
	ActivatorMaxHeldBytes    int64
	ActivatorMaxBodyBytes    int64
	// One model's share of the held caps (0: half of each with several
	// backends), the headers of
	// one request, the connections served at once, the paths forwarded.
	ActivatorMaxHeldRequestsPerModel int
	ActivatorMaxHeldBytesPerModel    int64
	ActivatorMaxHeaderBytes          int
	ActivatorMaxConnections          int
	ActivatorPaths                   []string
	ActivatorReadTimeout             time.Duration
	ActivatorWriteTimeout            time.Duration
	ActivatorIdleTimeout             time.Duration

	Endpoints daemon.Endpoints
	Lease     daemon.Lease
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "wva-system"
	}
	return &Options{
		KubeAPIQPS: 50, KubeAPIBurst: 100,
		PollInterval: 100 * time.Millisecond, ScrapeTimeout: time.Second, MaxConcurrentScrape: 16,
		EPPMetricsPort: 9090, EPPMetricsPath: "/metrics", EPPScheme: "http",
		WakeTimeout: 2 * time.Minute, RetryAfter: time.Second,
		ConfigNamespace: ns, Budget: budget.DefaultFlags(), BudgetGaugesEvery: 5 * time.Second,
		ActivatorMaxWait: 60 * time.Second, ActivatorHealthPath: "/health",
		ActivatorMaxHeldRequests: 100, ActivatorMaxHeldBytes: 64 << 20, ActivatorMaxBodyBytes: 4 << 20,
		ActivatorMaxHeaderBytes: 16 << 10, ActivatorMaxConnections: 1024, ActivatorPaths: append([]string(nil), DefaultPaths...),
		ActivatorReadTimeout: 30 * time.Second, ActivatorWriteTimeout: 10 * time.Minute, ActivatorIdleTimeout: 90 * time.Second,
		Endpoints: daemon.DefaultEndpoints(":8443", ":8081"), Lease: daemon.DefaultLease("wva-scale-from-zero", "", false),
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster config)")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the API server (a throttled scale call is a slow wake-up)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the API server")
	fs.StringVar(&o.WatchNamespace, "watch-namespace", o.WatchNamespace, "Only watch VAs and EPP pods in this namespace (default: all)")

	fs.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "How often the EPPs of groups at zero are scraped")
	fs.DurationVar(&o.ScrapeTimeout, "scrape-timeout", o.ScrapeTimeout, "Timeout of one EPP /metrics scrape")
	fs.IntVar(&o.MaxConcurrentScrape, "max-concurrent-scrapes", o.MaxConcurrentScrape, "Bound on EPP scrapes in flight (one per EPP at most); one namespace holds at most all but one, and a freed slot goes to the waiting namespace holding the fewest")
	fs.StringVar(&o.EPPSelector, "epp-selector", o.EPPSelector, "Label selector of EPP pods, e.g. app.kubernetes.io/component=epp; an EPP pod serves the groups of its namespace. Overrides InferencePool discovery (default: each InferencePool's spec.endpointPickerRef Service, scraped on --epp-metrics-port)")
	fs.IntVar(&o.EPPMetricsPort, "epp-metrics-port", o.EPPMetricsPort, "Port of the EPPs' metrics endpoint (EPP pods, or the InferencePools' EPP Services)")
	fs.StringVar(&o.EPPMetricsPath, "epp-metrics-path", o.EPPMetricsPath, "Path of the EPP pods' metrics endpoint")
	fs.StringVar(&o.EPPScheme, "epp-scheme", o.EPPScheme, "http or https for the EPP pods' metrics endpoint")
	fs.BoolVar(&o.EPPInsecureTLS, "epp-insecure-skip-verify", o.EPPInsecureTLS, "Skip TLS verification of EPP metrics endpoints (not allowed with --epp-bearer-token-file)")
	fs.StringVar(&o.EPPCAFile, "epp-ca-file", o.EPPCAFile, "PEM CA bundle that signed the EPPs' serving certificates (https only; required with --epp-bearer-token-file)")
	fs.StringVar(&o.EPPTLSServerName, "epp-tls-server-name", o.EPPTLSServerName, "Name the EPP certificates are checked against (default: the host of the URL; pod IPs are rarely in a certificate)")
	fs.StringVar(&o.EPPBearerTokenFile, "epp-bearer-token-file", o.EPPBearerTokenFile, "Opt-in: bearer token file sent to the EPPs, re-read on every request so rotation works; needs --epp-scheme=https (https --epp-url) and --epp-ca-file. Default: no token is sent")
	fs.StringArrayVar(&o.EPPURLs, "epp-url", o.EPPURLs, "Static EPP metrics URL serving every namespace (repeatable); overrides InferencePool discovery, not allowed with --epp-selector")

	fs.DurationVar(&o.WakeTimeout, "wake-timeout", o.WakeTimeout, "After a wake-up, how long to wait for the target to show a replica before waking again")
	fs.DurationVar(&o.RetryAfter, "retry-after", o.RetryAfter, "Wait before re-deciding a group refused by the budget or whose scale call failed")

	fs.StringVar(&o.ConfigNamespace, "config-namespace", o.ConfigNamespace, "Namespace of the budget ConfigMap (default: $POD_NAMESPACE or wva-system)")
	o.Budget.AddFlags(fs)
	fs.DurationVar(&o.BudgetGaugesEvery, "budget-metrics-interval", o.BudgetGaugesEvery, "How often the per-pool budget gauges are refreshed")

	fs.StringVar(&o.ActivatorListen, "activator-listen", o.ActivatorListen, "Serve the HTTP activator (OpenAI-compatible proxy that holds requests while a model wakes, for setups without an EPP) on this address (default: off)")
	fs.StringArrayVar(&o.ActivatorBackends, "activator-backend", o.ActivatorBackends, "model=URL: where the activator forwards requests for a model (repeatable), e.g. meta/llama-3.1-8b=http://llama.prod.svc:8000")
	fs.DurationVar(&o.ActivatorMaxWait, "activator-max-wait", o.ActivatorMaxWait, "Longest a request is held for its model to become ready (then 503 with Retry-After)")
	fs.StringVar(&o.ActivatorHealthPath, "activator-health-path", o.ActivatorHealthPath, "Backend path whose 200 means ready")
	fs.IntVar(&o.ActivatorMaxHeldRequests, "activator-max-held-requests", o.ActivatorMaxHeldRequests, "Most requests held at once waiting for a model; beyond it 503 with Retry-After (the model is still woken)")
	fs.Int64Var(&o.ActivatorMaxHeldBytes, "activator-max-held-bytes", o.ActivatorMaxHeldBytes, "Most bytes of requests (headers and bodies) in memory at once (being read, held or forwarded); beyond it 503 with Retry-After")
	fs.Int64Var(&o.ActivatorMaxBodyBytes, "activator-max-body-bytes", o.ActivatorMaxBodyBytes, "Largest request body accepted (413 beyond); at most --activator-max-held-bytes")
	fs.IntVar(&o.ActivatorMaxHeldRequestsPerModel, "activator-max-held-requests-per-model", o.ActivatorMaxHeldRequestsPerModel, "Most requests held at once for one model, so a model that never becomes ready leaves room for others; beyond it 503 with Retry-After (0: half of --activator-max-held-requests with several backends, all of it with one)")
	fs.Int64Var(&o.ActivatorMaxHeldBytesPerModel, "activator-max-held-bytes-per-model", o.ActivatorMaxHeldBytesPerModel, "Most bytes of requests held at once for one model; beyond it 503 with Retry-After (0: half of --activator-max-held-bytes with several backends, all of it with one)")
	fs.IntVar(&o.ActivatorMaxHeaderBytes, "activator-max-header-bytes", o.ActivatorMaxHeaderBytes, "Largest request line and headers accepted (431 beyond)")
	fs.IntVar(&o.ActivatorMaxConnections, "activator-max-connections", o.ActivatorMaxConnections, "Most client connections served at once (idle keep-alives included); further ones wait to be accepted")
	fs.StringSliceVar(&o.ActivatorPaths, "activator-paths", o.ActivatorPaths, "Request paths forwarded to the backends (POST, comma-separated); any other path is 404, so backend admin endpoints stay unreachable (GET /v1/models is answered by the activator)")
	fs.DurationVar(&o.ActivatorReadTimeout, "activator-read-timeout", o.ActivatorReadTimeout, "Longest the activator waits for a request's headers and body (slow senders are cut off with 408)")
	fs.DurationVar(&o.ActivatorWriteTimeout, "activator-write-timeout", o.ActivatorWriteTimeout, "Longest a forwarded response may stream; the connection's write deadline is --activator-max-wait plus this")
	fs.DurationVar(&o.ActivatorIdleTimeout, "activator-idle-timeout", o.ActivatorIdleTimeout, "How long an idle keep-alive connection to the activator stays open")

	o.Endpoints.AddFlags(fs)
	o.Lease.AddFlags(fs, "Only the Lease holder polls and wakes (the activator serves on every replica)")
}

// Complete fills derived defaults.
func (o *Options) Complete() {
	if o.Lease.Namespace == "" {
		o.Lease.Namespace = o.ConfigNamespace
	}
}

// Validate names the flag and value of every problem.
func (o *Options) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"--poll-interval": o.PollInterval, "--scrape-timeout": o.ScrapeTimeout,
		"--wake-timeout": o.WakeTimeout, "--retry-after": o.RetryAfter, "--activator-max-wait": o.ActivatorMaxWait,
		"--budget-metrics-interval": o.BudgetGaugesEvery, "--activator-read-timeout": o.ActivatorReadTimeout,
		"--activator-write-timeout": o.ActivatorWriteTimeout, "--activator-idle-timeout": o.ActivatorIdleTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must be positive", name, d))
		}
	}
	if o.MaxConcurrentScrape < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-scrapes=%d: must be >= 1", o.MaxConcurrentScrape))
	}
	// Neither EPP flag: the InferencePools name the EPPs (Run fails when
	// the API is not served and there is no activator either).
	if o.EPPSelector != "" && len(o.EPPURLs) > 0 {
		errs = append(errs, fmt.Errorf("--epp-selector=%q and --epp-url: choose one way to find EPPs", o.EPPSelector))
	}
	if o.EPPSelector != "" {
		if _, err := labels.Parse(o.EPPSelector); err != nil {
			errs = append(errs, fmt.Errorf("--epp-selector=%q: %w", o.EPPSelector, err))
		}
	}
	for _, u := range o.EPPURLs {
		if err := httpURL(u); err != nil {
			errs = append(errs, fmt.Errorf("--epp-url=%q: %w", u, err))
		}
	}
	if o.EPPMetricsPort < 1 || o.EPPMetricsPort > 65535 {
		errs = append(errs, fmt.Errorf("--epp-metrics-port=%d: want 1-65535", o.EPPMetricsPort))
	}
	if !strings.HasPrefix(o.EPPMetricsPath, "/") {
		errs = append(errs, fmt.Errorf("--epp-metrics-path=%q: must start with /", o.EPPMetricsPath))
	}
	if o.EPPScheme != "http" && o.EPPScheme != "https" {
		errs = append(errs, fmt.Errorf("--epp-scheme=%q: want http or https", o.EPPScheme))
	}
	errs = append(errs, o.validateEPPTLS()...)
	if o.ActivatorMaxHeldRequests < 1 {
		errs = append(errs, fmt.Errorf("--activator-max-held-requests=%d: must be >= 1", o.ActivatorMaxHeldRequests))
	}
	if o.ActivatorMaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("--activator-max-body-bytes=%d: must be >= 1", o.ActivatorMaxBodyBytes))
	}
	if o.ActivatorMaxHeldBytes < o.ActivatorMaxBodyBytes {
		errs = append(errs, fmt.Errorf("--activator-max-held-bytes=%d: must be >= --activator-max-body-bytes (%d), or no body that size is ever accepted",
			o.ActivatorMaxHeldBytes, o.ActivatorMaxBodyBytes))
	}
	errs = append(errs, o.validateActivatorShares()...)
	if o.ActivatorMaxHeaderBytes < 1024 {
		errs = append(errs, fmt.Errorf("--activator-max-header-bytes=%d: must be >= 1024", o.ActivatorMaxHeaderBytes))
	}
	if o.ActivatorMaxConnections < 1 {
		errs = append(errs, fmt.Errorf("--activator-max-connections=%d: must be >= 1", o.ActivatorMaxConnections))
	}
	if len(o.ActivatorPaths) == 0 {
		errs = append(errs, errors.New("--activator-paths: empty; name at least one path to forward"))
	}
	for _, p := range o.ActivatorPaths {
		if u, err := url.Parse(p); err != nil || !strings.HasPrefix(p, "/") || u.Path != p || u.EscapedPath() != p {
			errs = append(errs, fmt.Errorf("--activator-paths=%q: want a plain path such as /v1/completions (no query, no escapes)", p))
		}
	}
	errs = append(errs, o.Budget.Validate()...)
	if _, err := ParseBackends(o.ActivatorBackends); err != nil {
		errs = append(errs, err)
	}
	if o.ActivatorListen != "" && len(o.ActivatorBackends) == 0 {
		errs = append(errs, fmt.Errorf("--activator-listen=%q: needs at least one --activator-backend model=URL", o.ActivatorListen))
	}
	if err := o.Endpoints.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateActivatorShares checks one model's share of the held caps: set
// (0 is half), not above the whole, and room for one body of the largest size.
func (o *Options) validateActivatorShares() []error {
	var errs []error
	switch r := o.ActivatorMaxHeldRequestsPerModel; {
	case r < 0:
		errs = append(errs, fmt.Errorf("--activator-max-held-requests-per-model=%d: must be >= 0 (0: half of --activator-max-held-requests)", r))
	case r > o.ActivatorMaxHeldRequests:
		errs = append(errs, fmt.Errorf("--activator-max-held-requests-per-model=%d: must be <= --activator-max-held-requests (%d)", r, o.ActivatorMaxHeldRequests))
	}
	switch b := o.ActivatorMaxHeldBytesPerModel; {
	case b < 0:
		errs = append(errs, fmt.Errorf("--activator-max-held-bytes-per-model=%d: must be >= 0 (0: half of --activator-max-held-bytes)", b))
	case b > o.ActivatorMaxHeldBytes:
		errs = append(errs, fmt.Errorf("--activator-max-held-bytes-per-model=%d: must be <= --activator-max-held-bytes (%d)", b, o.ActivatorMaxHeldBytes))
	case b > 0 && b < o.ActivatorMaxBodyBytes:
		errs = append(errs, fmt.Errorf("--activator-max-held-bytes-per-model=%d: must be >= --activator-max-body-bytes (%d), or no body that size is ever held",
			b, o.ActivatorMaxBodyBytes))
	}
	return errs
}

// validateEPPTLS enforces the trust model of the EPP scrapes: no token by
// default; a token only over HTTPS with a certificate verified against
// --epp-ca-file, so neither a sniffer nor a pod that merely carries the EPP
// label (and has no certificate from that CA) ever sees it.
func (o *Options) validateEPPTLS() []error {
	var errs []error
	https := o.EPPScheme == "https"
	if len(o.EPPURLs) > 0 {
		https = true
		for _, u := range o.EPPURLs {
			if !strings.HasPrefix(strings.ToLower(u), "https://") {
				https = false
			}
		}
	}
	if o.EPPCAFile != "" {
		if _, err := os.Stat(o.EPPCAFile); err != nil {
			errs = append(errs, fmt.Errorf("--epp-ca-file: %w", err))
		}
		if !https {
			errs = append(errs, fmt.Errorf("--epp-ca-file=%q: only used with --epp-scheme=https (or https --epp-url)", o.EPPCAFile))
		}
	}
	if o.EPPBearerTokenFile == "" {
		return errs
	}
	if _, err := os.Stat(o.EPPBearerTokenFile); err != nil {
		errs = append(errs, fmt.Errorf("--epp-bearer-token-file: %w", err))
	}
	switch {
	case len(o.EPPURLs) > 0 && !https:
		errs = append(errs, fmt.Errorf("--epp-bearer-token-file with a plain-HTTP --epp-url: the token is only sent over HTTPS; use https URLs and --epp-ca-file"))
	case len(o.EPPURLs) == 0 && !https:
		errs = append(errs, fmt.Errorf("--epp-bearer-token-file with --epp-scheme=%s: the token is only sent over HTTPS; set --epp-scheme=https and --epp-ca-file", o.EPPScheme))
	}
	if o.EPPCAFile == "" {
		errs = append(errs, errors.New("--epp-bearer-token-file needs --epp-ca-file: the token is only sent to an EPP whose certificate that CA signed"))
	}
	if o.EPPInsecureTLS {
		errs = append(errs, errors.New("--epp-bearer-token-file with --epp-insecure-skip-verify: the token is only sent to a verified server; drop one of them"))
	}
	return errs
}

// ParseBackends reads repeated model=URL flags. The model is everything
// before the last '=' that precedes "http": model IDs may contain '=' but
// URLs start with a scheme.
func ParseBackends(specs []string) (map[string]*url.URL, error) {
	out := map[string]*url.URL{}
	var errs []error
	for _, s := range specs {
		i := strings.LastIndex(s, "=http")
		if i <= 0 {
			errs = append(errs, fmt.Errorf("--activator-backend=%q: want model=http(s)://host[:port][/path]", s))
			continue
		}
		model, raw := s[:i], s[i+1:]
		if err := httpURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("--activator-backend=%q: %w", s, err))
			continue
		}
		if _, dup := out[model]; dup {
			errs = append(errs, fmt.Errorf("--activator-backend=%q: model %q given twice", s, model))
			continue
		}
		u, _ := url.Parse(raw)
		out[model] = u
	}
	return out, errors.Join(errs...)
}

func httpURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http(s) URL with a host")
	}
	return nil
}
