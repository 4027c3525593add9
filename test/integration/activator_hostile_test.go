package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/test/testenv"
)

// xs reads as an endless run of 'x': request bodies generated as they are
// sent, so the attacking clients hold no copy.
type xs struct{}

func (xs) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'x'
	}
	return len(b), nil
}

// TestActivatorSurvivesHostileClients runs the real `wva scale-from-zero`
// binary with its activator, at the default bounds and with GOMEMLIMIT as
// deploy/scale-from-zero sets it, against the worst clients of
// pkg/scalefromzero's TestActivatorWorstClients: connections up to
// --activator-max-connections, most stalled in headers just under
// --activator-max-header-bytes, 16 uploads stalled after 13 bytes of a
// declared 4 MiB, and 100 requests of 4 MiB for a model that never becomes
// ready. A request for a ready model is answered during the attack, the
// process stays up, and its peak resident memory stays under the pod's
// 256 Mi limit.
func TestActivatorSurvivesHostileClients(t *testing.T) {
	t.Parallel()
	const (
		ns                 = "act-hostile"
		readyModel, never  = "ready-model", "never-model"
		maxConnections     = 1024 // --activator-max-connections default
		maxHeaderBytes     = 16 << 10
		slowUploads        = 16
		neverRequests      = 100
		bodySize           = 4 << 20
		spare              = 8 // connections left for the well-behaved client
		headerConns        = maxConnections - slowUploads - neverRequests - spare
		podLimit           = 256 << 20
		wellBehavedLatency = 2 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system")
	sfzApplyRBAC(ctx, t, cs)
	kubeconfig := sfzServiceAccountKubeconfig(t, cluster)
	createNamespace(ctx, t, cs, ns)
	sfzDeployment(ctx, t, cs, ns, "ready", 1, nil)
	sfzDeployment(ctx, t, cs, ns, "never", 0, nil)
	for name, model := range map[string]string{"ready": readyModel, "never": never} {
		_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, newVA(ns, name, model, "5", 0, 2), metav1.CreateOptions{})
		require.NoError(t, err)
	}

	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}]}`)
	}))
	t.Cleanup(ready.Close)
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "loading", http.StatusServiceUnavailable)
	}))
	t.Cleanup(notReady.Close)

	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	front := "http://" + listen
	p := testenv.StartProcessEnv(ctx, t, "scale-from-zero", wvaBinary, []string{"GOMEMLIMIT=200MiB"},
		"scale-from-zero", "--kubeconfig="+kubeconfig, "--watch-namespace="+ns, "--activator-listen="+listen,
		"--activator-backend="+readyModel+"="+ready.URL, "--activator-backend="+never+"="+notReady.URL,
		"--activator-max-wait=30s", "--leader-elect=false", "--v=1")
	// Closed before the process is stopped (cleanups run last first), so
	// it does not wait for the attackers to leave.
	attack, endAttack := context.WithCancel(ctx)
	t.Cleanup(endAttack)
	// VmHWM counts the binary's mapped pages too (RssFile), which the
	// kernel can reclaim; the anonymous part is sampled apart.
	peakAnon := make(chan int64, 1)
	go func() {
		var peak int64
		defer func() { peakAnon <- peak }()
		for attack.Err() == nil {
			if v, err := p.MemStatus("RssAnon"); err == nil {
				peak = max(peak, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// Headers just under the cap: half as one long line, half as many
	// short ones; uploads that declare 4 MiB and send 13 bytes.
	long := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nX-Pad: " + strings.Repeat("a", maxHeaderBytes-200))
	short := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\n")
	for i := 0; len(short) < maxHeaderBytes-300; i++ {
		short = fmt.Appendf(short, "X-Pad-%d: %s\r\n", i, strings.Repeat("a", 40))
	}
	slowUpload := []byte("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{\"model\":\"ne")
	attackers := make(chan error, headerConns+slowUploads)
	for i := range headerConns + slowUploads {
		go func() {
			c, err := (&net.Dialer{}).DialContext(attack, "tcp", listen)
			if err != nil {
				attackers <- err
				return
			}
			context.AfterFunc(attack, func() { _ = c.Close() })
			switch {
			case i < slowUploads:
				_, err = c.Write(slowUpload)
			case i%2 == 0:
				_, err = c.Write(long)
			default:
				_, err = c.Write(short)
			}
			attackers <- err
		}()
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	neverCodes := make(chan int, neverRequests)
	prefix := `{"model":"` + never + `","pad":"`
	for range neverRequests {
		go func() {
			body := io.MultiReader(strings.NewReader(prefix), io.LimitReader(xs{}, int64(bodySize-len(prefix)-2)), strings.NewReader(`"}`))
			req, _ := http.NewRequestWithContext(attack, http.MethodPost, front+"/v1/completions", body)
			req.ContentLength = bodySize
			resp, err := client.Do(req)
			if err != nil {
				neverCodes <- 0 // refused under the upload, or the test ended
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			neverCodes <- resp.StatusCode
		}()
	}
	for range headerConns + slowUploads {
		require.NoError(t, <-attackers)
	}
	// The model that never becomes ready holds its share (half the held
	// bytes with two backends); its other requests are refused.
	refused := 0
	var held float64
	testenv.Eventually(ctx, t, "every request for the model never ready held or refused", func() (bool, string) {
		for len(neverCodes) > 0 {
			code := <-neverCodes
			require.Contains(t, []int{http.StatusServiceUnavailable, 0}, code)
			refused++
		}
		var err error
		held, err = sfzMetric(ctx, p.MetricsURL, "wva_activator_held_requests")
		return err == nil && int(held)+refused == neverRequests, fmt.Sprintf("held %v (%v), refused %d", held, err, refused)
	})
	require.Positive(t, held, "the model never ready holds requests")
	time.Sleep(200 * time.Millisecond) // the process has read what the attackers sent

	start := time.Now()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}).
		Post(front+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"`+readyModel+`","messages":[]}`))
	require.NoError(t, err, "a well-behaved request during the attack")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	latency := time.Since(start)
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Less(t, latency, wellBehavedLatency, "the well-behaved request is answered promptly during the attack")

	heldBytes, err := sfzMetric(ctx, p.MetricsURL, "wva_activator_held_bytes")
	require.NoError(t, err, "the process is up and answers /metrics during the attack")
	peak, err := p.PeakRSS()
	require.NoError(t, err)
	endAttack()
	anon := <-peakAnon
	t.Logf("%d connections: %d stalled in %d KiB of headers, %d uploads stalled after 13 of 4096 KiB, %d x 4 MiB for a model never ready (%v held, %d refused); "+
		"%.1f MiB held; well-behaved request answered in %s; peak RSS (VmHWM) of the process %.1f MiB, of which anonymous about %.1f MiB (sampled every 20ms; GOMEMLIMIT=200MiB, pod limit 256 MiB)",
		headerConns+slowUploads+neverRequests, headerConns, maxHeaderBytes>>10, slowUploads, neverRequests, held, refused,
		heldBytes/(1<<20), latency.Round(time.Millisecond), float64(peak)/(1<<20), float64(anon)/(1<<20))
	// The container is killed when what the kernel cannot reclaim passes
	// its limit: anonymous memory. The binary's mapped pages in VmHWM are
	// page cache, reclaimed first under the limit.
	assert.Less(t, anon, int64(podLimit), "peak anonymous memory within the pod limit")
}
