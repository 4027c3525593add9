// Command testcluster starts the wva test control plane (etcd +
// kube-apiserver, optionally kube-controller-manager, kube-scheduler and
// Prometheus) on loopback, prints how to reach it, and runs until Ctrl-C.
//
//	go run ./test/harness/cmd/testcluster -controller-manager
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wva-project/wva/test/harness"
)

func main() {
	var (
		kcm         = flag.Bool("controller-manager", false, "also start kube-controller-manager")
		controllers = flag.String("controllers", "", "comma-separated --controllers for kube-controller-manager (default: harness.DefaultControllers)")
		hpaSync     = flag.Duration("hpa-sync-period", time.Second, "--horizontal-pod-autoscaler-sync-period")
		scheduler   = flag.Bool("scheduler", false, "also start kube-scheduler")
		promTargets = flag.String("prometheus-targets", "", "if set, start Prometheus scraping these comma-separated host:port targets")
		gates       = flag.String("feature-gates", "", "feature gates for all components, e.g. A=true,B=false")
		dir         = flag.String("dir", "", "working directory (default: a new temp dir, removed on exit)")
		keep        = flag.Bool("keep", false, "keep the working directory on exit")
		v           = flag.Int("v", 0, "kube-apiserver verbosity")
	)
	flag.Parse()
	log.SetFlags(log.Ltime)

	fg, err := parseGates(*gates)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := harness.Start(ctx, harness.Options{
		Dir: *dir, KeepDir: *keep || *dir != "", FeatureGates: fg, Verbosity: *v, Logf: log.Printf,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Stop()

	if *kcm {
		opts := harness.ControllerManagerOptions{HPASyncPeriod: *hpaSync, FeatureGates: fg}
		if *controllers != "" {
			opts.Controllers = strings.Split(*controllers, ",")
		}
		if _, err := c.StartControllerManager(ctx, opts); err != nil {
			c.Stop()
			log.Fatal(err)
		}
	}
	if *scheduler {
		if _, err := c.StartScheduler(ctx, harness.SchedulerOptions{FeatureGates: fg}); err != nil {
			c.Stop()
			log.Fatal(err)
		}
	}
	if *promTargets != "" {
		p, err := harness.StartPrometheus(ctx, harness.PrometheusOptions{
			Dir: c.Dir + "/prometheus", KeepDir: true, Targets: strings.Split(*promTargets, ","),
		})
		if err != nil {
			c.Stop()
			log.Fatal(err)
		}
		defer p.Close()
		fmt.Printf("PROMETHEUS_URL=%s\n", p.URL)
	}

	fmt.Printf("KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Printf("# apiserver %s, logs in %s\n", c.Host, c.Dir)
	fmt.Printf("# e.g.: kubectl --kubeconfig %s get ns   (Ctrl-C to stop)\n", c.KubeconfigPath)
	<-ctx.Done()
	log.Print("stopping")
}

func parseGates(s string) (map[string]bool, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || (val != "true" && val != "false") {
			return nil, fmt.Errorf("bad feature gate %q (want Name=true|false)", kv)
		}
		m[k] = val == "true"
	}
	return m, nil
}
