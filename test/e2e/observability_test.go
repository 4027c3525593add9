//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// observed gives the dashboard and the alerts series to show: s6/observed
// at 2 replicas under load (KV 0.5), with its HPA reading the decision. It
// deploys the variant only the first time.
func (r *rig) observed(ctx context.Context, t *testing.T) {
	t.Helper()
	if _, err := r.wva.LlmdV1alpha1().VariantAutoscalings("s6").Get(ctx, "observed", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		r.deploy(ctx, t, "s6", "observed", observedModel, "5", 2, 1, 4)
		r.fleet.SetLoad("s6", observedModel, 5)
	}
	r.waitReady(ctx, t, "s6", "observed", 2)
	r.waitDecision(ctx, t, "s6", "observed", 2)
}

// checkDashboard queries every panel and variable of the Grafana dashboard
// on the rig's Prometheus: each must parse and return at least one series.
func checkDashboard(ctx context.Context, t *testing.T, r *rig) {
	r.observed(ctx, t)
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
	r.observed(ctx, t)
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

// checkNoForbidden fails on any request the API server refused (403) to a
// wva process: each runs as its deploy/ ServiceAccount, and the API
// server's audit log records every request made as one of them, with the
// response code. A missing rule shows here long before it breaks a
// scenario. It covers what ran before it in the same rig.
func checkNoForbidden(t *testing.T, r *rig) {
	requests, forbidden := auditedRequests(t, r.auditLog)
	for _, sa := range []string{"wva-adapter", "wva-controller", "wva-scale-from-zero"} {
		user := "system:serviceaccount:" + configNS + ":" + sa
		if requests[user] == 0 {
			t.Errorf("the audit log has no request by %s: the check would see no refusal either", user)
		}
	}
	for _, f := range forbidden {
		t.Errorf("403: %s", f)
	}
	r.report.add("6 RBAC: adapter, controller and fast path made %d API requests as their deploy/ ServiceAccounts, %d refused (API server audit log)",
		requests["system:serviceaccount:"+configNS+":wva-adapter"]+requests["system:serviceaccount:"+configNS+":wva-controller"]+
			requests["system:serviceaccount:"+configNS+":wva-scale-from-zero"], len(forbidden))
}

// auditEvent is the part of an audit.k8s.io/v1 Event the check reads.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// auditedRequests reads the audit log: completed requests per user, and
// each refused one as "user verb URI".
func auditedRequests(t *testing.T, path string) (map[string]int, []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	requests := map[string]int{}
	var forbidden []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		// A watch also logs ResponseStarted; count each request once.
		if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		requests[e.User.Username]++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusForbidden {
			forbidden = append(forbidden, e.User.Username+" "+e.Verb+" "+e.RequestURI)
		}
	}
	return requests, forbidden
}
