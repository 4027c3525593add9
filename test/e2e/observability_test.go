//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wva-project/wva/test/harness"
	"github.com/wva-project/wva/test/testenv"
)

// dashboardVars stand in for the dashboard's template variables: "All".
var dashboardVars = strings.NewReplacer(`"$namespace"`, `".*"`, `"$model"`, `".*"`, `"$variant"`, `".*"`)

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.*), *([a-z_]+)\)$`)

// dashboardQueries returns every PromQL expression of
// deploy/grafana/wva-dashboard.json by where it is used, variables
// substituted; label_values() variable queries become count by (label).
func dashboardQueries(t *testing.T) map[string]string {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "grafana", "wva-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %q %s", p.Title, tg.RefID)] = dashboardVars.Replace(tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)["query"].(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
		}
		out["variable "+v.Name] = fmt.Sprintf("count by (%s) (%s)", m[2], dashboardVars.Replace(m[1]))
	}
	return out
}

// checkDashboard queries every panel and variable of the Grafana dashboard
// on the rig's Prometheus: each must parse and return at least one series.
func checkDashboard(ctx context.Context, t *testing.T, r *rig) {
	queries := dashboardQueries(t)
	for where, expr := range queries {
		qctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		testenv.Eventually(qctx, t, where+": "+expr, func() (bool, string) {
			s, err := r.prom.Query(qctx, expr)
			if err != nil {
				return false, err.Error()
			}
			return len(s) > 0, "no series"
		})
		cancel()
	}
	r.report.add("6 dashboard: %d panel and variable queries parse and return series on the rig's Prometheus", len(queries))
}

// healthyAlerts are the alerts whose condition the healthy rig must
// evaluate to false for every series. Each comparison is turned into its
// `bool` form so the test sees the series it compares rather than an empty
// result, which would also come from a misspelt metric.
var healthyAlerts = map[string][2]string{
	"WVAEngineNoSuccessfulCycle":  {" > ", " > bool "},
	"WVADecisionsStale":           {" > ", " > bool "},
	"WVAHPANotFollowingDecisions": {"!= on", "!= bool on"},
}

// checkAlerts evaluates deploy/monitoring's alert expressions on the rig's
// Prometheus: all parse; the engine, staleness and HPA ones hold false.
func checkAlerts(ctx context.Context, t *testing.T, r *rig) {
	exprs := alertExprs(t)
	for name := range healthyAlerts {
		if _, ok := exprs[name]; !ok {
			t.Fatalf("alert %s missing from deploy/monitoring", name)
		}
	}
	for name, expr := range exprs {
		if _, err := r.prom.Query(ctx, expr); err != nil {
			t.Fatalf("alert %s: %v", name, err)
		}
		rep, ok := healthyAlerts[name]
		if !ok {
			continue
		}
		if strings.Count(expr, rep[0]) != 1 {
			t.Fatalf("alert %s: want exactly one %q to evaluate in bool form: %s", name, rep[0], expr)
		}
		boolExpr := strings.Replace(expr, rep[0], rep[1], 1)
		// The HPA follows a scale-down after its 30 s window.
		qctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		testenv.Eventually(qctx, t, "alert "+name+" false on every series: "+boolExpr, func() (bool, string) {
			s, err := r.prom.Query(qctx, boolExpr)
			if err != nil {
				return false, err.Error()
			}
			return len(s) > 0 && allZero(s), fmt.Sprint(s)
		})
		cancel()
	}
	r.report.add("6 alerts: %d expressions parse; %d evaluate false on every series of the healthy rig", len(exprs), len(healthyAlerts))
}

// alertExprs are deploy/monitoring's alert expressions by alert name.
func alertExprs(t *testing.T) map[string]string {
	objs, err := testenv.RenderKustomization(filepath.Join(testenv.RepoRoot(), "deploy", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, rule := range rules {
				m := rule.(map[string]any)
				exprs[m["alert"].(string)] = m["expr"].(string)
			}
		}
	}
	return exprs
}

func allZero(s []harness.Sample) bool {
	for _, v := range s {
		if v.Value != 0 {
			return false
		}
	}
	return true
}

// checkNoForbidden fails on any request the API server refused to a wva
// process: each runs as its deploy/ ServiceAccount, and a missing rule shows
// as a "forbidden" error in its log long before it breaks a scenario.
func checkNoForbidden(t *testing.T, r *rig) {
	for _, p := range []*testenv.Process{r.adapter, r.controller, r.fastPath} {
		for _, line := range strings.Split(p.Log(), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s: %s", p.Name, line)
			}
		}
	}
	r.report.add("6 RBAC: adapter, controller and fast path ran scenarios 1-3 and 5 as their deploy/ ServiceAccounts with no forbidden request")
}
