package adapter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/wva-project/wva/pkg/daemon"
	"github.com/wva-project/wva/pkg/decide"
	"github.com/wva-project/wva/pkg/engine"
)

// stuckViews holds every cycle until released (a hung engine loop);
// entered tells that a cycle has begun.
type stuckViews struct{ entered, release chan struct{} }

func (s stuckViews) Views() ([]decide.View, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return nil, errors.New("released")
}

// TestProbes: /healthz fails (500, saying why) only on the leader whose
// engine has ended no cycle within --liveness-stale-after; /readyz fails
// until the informers have synced.
func TestProbes(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		leading    bool
		synced     bool
		stall      time.Duration // fake time passed with the engine's cycle stuck
		healthCode int
		healthBody string
		readyCode  int
	}{
		// The leader is not ready before its first successful cycle.
		{name: "leader within the bound", leading: true, synced: true, stall: 3 * time.Minute, healthCode: 200, healthBody: "ok", readyCode: 503},
		{name: "leader past the bound", leading: true, synced: true, stall: 5 * time.Minute, healthCode: 500,
			healthBody: "engine: no cycle completed in the 5m0s since it started, bound 3m0s", readyCode: 503},
		{name: "follower: its engine does not run", synced: true, stall: time.Hour, healthCode: 200, healthBody: "ok", readyCode: 200},
		{name: "informers not synced", stall: 0, healthCode: 200, healthBody: "ok", readyCode: 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			opts := NewOptions()
			opts.PrometheusURL = "http://prometheus:9090"
			opts.EngineInterval, opts.CycleTimeout = 30*time.Second, 90*time.Second
			opts.Complete()
			require.Equal(t, 3*time.Minute, opts.LivenessStaleAfter, "default: 3 intervals + cycle timeout")
			views := stuckViews{entered: make(chan struct{}, 1), release: make(chan struct{})}
			a := &Adapter{Options: opts, Engine: &engine.Engine{Views: views, Clock: clk, Interval: time.Hour,
				Observe: engine.NewMetrics(prometheus.NewRegistry())}}
			a.synced.Store(tc.synced)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			if tc.leading {
				a.leading.Store(true)
				go func() { a.Engine.Run(ctx); close(done) }()
				select {
				case <-views.entered:
				case <-time.After(5 * time.Second):
					t.Fatal("the engine did not start a cycle")
				}
			} else {
				close(done)
			}
			t.Cleanup(func() { cancel(); close(views.release); <-done })
			clk.Step(tc.stall)

			srv := httptest.NewServer(daemon.ProbeHandler(a.ready, a.live))
			defer srv.Close()
			code, body := get(t, srv.URL+"/healthz")
			assert.Equal(t, tc.healthCode, code)
			assert.Equal(t, tc.healthBody, body)
			code, _ = get(t, srv.URL+"/readyz")
			assert.Equal(t, tc.readyCode, code)
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
