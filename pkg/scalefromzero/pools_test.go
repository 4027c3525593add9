package scalefromzero

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/wva-project/wva/pkg/inferencepool"
)

func TestEndpointServes(t *testing.T) {
	l4 := Group{Key: GroupKey{Namespace: "prod", ModelID: "llama"}, Variants: []Variant{{PodLabels: map[string]string{"app": "l4"}}}}
	mixed := Group{Key: GroupKey{Namespace: "prod", ModelID: "mistral"},
		Variants: []Variant{{PodLabels: map[string]string{"app": "a"}}, {PodLabels: map[string]string{"app": "l4"}}}}
	pool := &inferencepool.Pool{Namespace: "prod", Name: "l4", Selector: map[string]string{"app": "l4"}}
	devPool := &inferencepool.Pool{Namespace: "dev", Name: "l4", Selector: map[string]string{"app": "l4"}}
	tests := []struct {
		name string
		ep   Endpoint
		g    Group
		want bool
	}{
		{"static serves every group", Endpoint{URL: "u"}, l4, true},
		{"namespace EPP serves its namespace", Endpoint{URL: "u", Namespace: "prod"}, l4, true},
		{"namespace EPP not another's", Endpoint{URL: "u", Namespace: "dev"}, l4, false},
		{"pool selecting the pods", Endpoint{URL: "u", Namespace: "prod", Pool: pool}, l4, true},
		{"pool selecting one variant's pods", Endpoint{URL: "u", Namespace: "prod", Pool: pool}, mixed, true},
		{"pool selecting other pods", Endpoint{URL: "u", Namespace: "prod",
			Pool: &inferencepool.Pool{Namespace: "prod", Selector: map[string]string{"app": "h100"}}}, l4, false},
		{"pool of another namespace", Endpoint{URL: "u", Namespace: "prod", Pool: devPool}, l4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.ep.Serves(tt.g)) })
	}
}

// TestRunnerPoolEndpoints: with InferencePools, an EPP's queue wakes only
// the groups whose pods its pool selects, not every group of the model's
// namespace.
func TestRunnerPoolEndpoints(t *testing.T) {
	c := newCluster()
	c.variant("prod", "l4", "llama", "5", 0, "", 1)
	c.variant("prod", "h100", "mistral", "5", 0, "", 1)
	f := newWakerFixture(c, false)
	l4EPP := &fakeEPP{body: `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 0` + "\n"}
	// A queue for llama at the h100 pool's EPP is not llama's pool's queue.
	h100EPP := &fakeEPP{body: `llm_d_epp_flow_control_queue_size{target_model_name="llama"} 3
llm_d_epp_flow_control_queue_size{target_model_name="mistral"} 0
`}
	l4Srv, h100Srv := httptest.NewServer(l4EPP), httptest.NewServer(h100EPP)
	defer l4Srv.Close()
	defer h100Srv.Close()
	called := make(chan Target, 10)
	f.scaler.onCall = func(t Target) { called <- t }
	r := &Runner{State: f.waker.State, Waker: f.waker, Metrics: f.waker.Metrics, Interval: 10 * time.Millisecond,
		Endpoints: listEndpoints{
			{URL: l4Srv.URL, Namespace: "prod", Pool: &inferencepool.Pool{Namespace: "prod", Name: "l4", Selector: map[string]string{"app": "l4"}}},
			{URL: h100Srv.URL, Namespace: "prod", Pool: &inferencepool.Pool{Namespace: "prod", Name: "h100", Selector: map[string]string{"app": "h100"}}},
		},
		Scraper: NewScraper(l4Srv.Client(), time.Second, 4, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	assert.Eventually(t, func() bool { return l4EPP.requests.Load() > 3 && h100EPP.requests.Load() > 3 }, 5*time.Second, 5*time.Millisecond)
	select {
	case got := <-called:
		t.Fatalf("woke %s: no pool shows a queue for its own groups", got.Name)
	default:
	}
	h100EPP.set(func(f *fakeEPP) { f.body = `llm_d_epp_flow_control_queue_size{target_model_name="mistral"} 2` + "\n" })
	select {
	case got := <-called:
		assert.Equal(t, "h100", got.Name)
	case <-time.After(5 * time.Second):
		t.Fatal("no scale call")
	}
}
