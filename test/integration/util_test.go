package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/generated/clientset/versioned"
	"github.com/wva-project/wva/test/fakevllm"
	"github.com/wva-project/wva/test/testenv"
)

// hpaReadyIs is a testenv.Eventually condition: the VA's HPAReady has
// status and reason, and its message contains msg.
func hpaReadyIs(ctx context.Context, wva versioned.Interface, ns, name string, status metav1.ConditionStatus, reason, msg string) func() (bool, string) {
	return func() (bool, string) {
		got, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, llmdv1alpha1.ConditionTypeHPAReady)
		return c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, msg), fmt_(c, nil)
	}
}

// configLabels is the label wva requires on its ConfigMaps.
func configLabels() map[string]string {
	return map[string]string{llmdv1alpha1.LabelConfigMapName: llmdv1alpha1.ConfigMapLabelValue}
}

// fmt_ renders a value and an error for eventually's "last seen" detail.
func fmt_(v any, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", v)
}

func httpGet(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// tryGet is httpGet without failing the test (for polling).
func tryGet(ctx context.Context, url string) (string, error) { return testenv.Get(ctx, url) }

// traffic finishes requests on a fake vLLM pod at a steady rate (req/s)
// until the test ends, every 100ms, carrying fractions over.
type traffic struct {
	mu   sync.Mutex
	rate float64
}

func startTraffic(t *testing.T, e *fakevllm.Exporter, p fakevllm.Pod, rate float64, r fakevllm.Request) *traffic {
	tr := &traffic{rate: rate}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		last, carry := time.Now(), 0.0
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				tr.mu.Lock()
				carry += tr.rate * now.Sub(last).Seconds()
				tr.mu.Unlock()
				last = now
				if n := int(carry); n > 0 {
					e.Finished(p, n, r)
					carry -= float64(n)
				}
			}
		}
	}()
	return tr
}

func (tr *traffic) set(rate float64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.rate = rate
}
