package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wva-project/wva/pkg/eppqueue"
	"github.com/wva-project/wva/test/testenv"
)

// hostileAnswer is one answer a pod labelled as an EPP can give.
type hostileAnswer struct {
	name        string
	contentType string
	gzip        bool // sent with Content-Encoding: gzip: the cap counts decoded bytes
	body        func() []byte
}

// hostileAnswers are the answers that used to kill or bloat the process:
// a 7-byte protobuf answer declaring a 300 GiB message (the reported "fatal
// error: out of memory" in 107 ms), an answer past the 16 MiB cap, a 2 MiB
// text line, garbage, one queue sample with 8,000 labels (5 CPU-s and
// 2.7 GB of allocations each with a general text parser), 16 MiB of
// distinct models gzipped to well under a megabyte (222 MiB of heap), and
// the costliest answer within every bound, gzipped.
var hostileAnswers = []hostileAnswer{
	{"7 bytes declaring 300 GiB", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited", false,
		func() []byte { return append(binary.AppendUvarint(nil, 300<<30), 'x') }},
	{"24 MiB text answer", "text/plain; version=0.0.4", false,
		func() []byte { return []byte(strings.Repeat("# filler comment line\n", 24<<20/22)) }},
	{"2 MiB line", "text/plain; version=0.0.4", false,
		func() []byte {
			return []byte(`llm_d_epp_flow_control_queue_size{target_model_name="` + strings.Repeat("a", 2<<20) + "\"} 3\n")
		}},
	{"garbage protobuf", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited", false,
		func() []byte { return []byte("\x05\xff\xff\xff\xff\xff") }},
	{"8,000 labels on one queue sample", "text/plain; version=0.0.4", false, sync.OnceValue(func() []byte {
		var b strings.Builder
		b.WriteString(eppqueue.Metric + `{target_model_name="meta/llama-3.1-8b"`)
		for i := range 8000 {
			fmt.Fprintf(&b, `,l%d="v"`, i)
		}
		b.WriteString("} 3\n")
		return []byte(b.String())
	})},
	{"16 MiB of distinct models, gzipped", "text/plain; version=0.0.4", true, sync.OnceValue(func() []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < eppqueue.MaxBytes-100; i++ {
			fmt.Fprintf(&b, "%s{target_model_name=\"model-%07d\"} 1\n", eppqueue.Metric, i)
		}
		return b.Bytes()
	})},
	{"the costliest answer within the bounds, gzipped", "text/plain; version=0.0.4", true, sync.OnceValue(func() []byte {
		// A line of MaxLineBytes, then MaxModels-1 models with names of
		// MaxModelBytes, repeated up to MaxBytes.
		var b bytes.Buffer
		b.WriteString("# " + strings.Repeat("c", eppqueue.MaxLineBytes-10) + "\n")
		name := strings.Repeat("n", eppqueue.MaxModelBytes-8)
		for i := 0; b.Len() < eppqueue.MaxBytes-2048; i++ {
			fmt.Fprintf(&b, "%s{target_model_name=\"%s%07d\"} 1\n", eppqueue.Metric, name, i%(eppqueue.MaxModels-1))
		}
		return b.Bytes()
	})},
}

// TestScaleFromZeroSurvivesHostileEPP runs the real `wva scale-from-zero`
// binary against an EPP that answers every hostile body in turn, each
// several times: the process stays up with bounded memory, counts the bad
// scrapes, and still wakes the group once the EPP answers sensibly.
func TestScaleFromZeroSurvivesHostileEPP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cs, wva := startCluster(ctx, t, "wva-system")
	sfzApplyRBAC(ctx, t, cs)
	kubeconfig := sfzServiceAccountKubeconfig(t, cluster)

	const ns, name, model, rounds = "sfz-hostile", "llama-l4", "meta/llama-3.1-8b", 3
	createNamespace(ctx, t, cs, ns)
	sfzDeployment(ctx, t, cs, ns, name, 0, nil)
	_, err := wva.LlmdV1alpha1().VariantAutoscalings(ns).Create(ctx, newVA(ns, name, model, "5", 0, 2), metav1.CreateOptions{})
	require.NoError(t, err)

	var mu sync.Mutex
	served, sane := 0, false
	epp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		i := served
		served++
		answerSane := sane
		mu.Unlock()
		if answerSane {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprintf(w, "llm_d_epp_flow_control_queue_size{target_model_name=%q} 3\n", model)
			return
		}
		a := hostileAnswers[i%len(hostileAnswers)]
		w.Header().Set("Content-Type", a.contentType)
		if a.gzip {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(a.body())
			_ = zw.Close()
			return
		}
		_, _ = w.Write(a.body())
	}))
	t.Cleanup(epp.Close)

	p := startWVAProcess(ctx, t, "scale-from-zero", []string{"scale-from-zero", "--kubeconfig=" + kubeconfig,
		"--watch-namespace=" + ns, "--epp-url=" + epp.URL + "/metrics", "--leader-elect=false", "--v=2"})

	testenv.Eventually(ctx, t, "every hostile answer served several times", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return served >= rounds*len(hostileAnswers), fmt.Sprintf("%d answers served", served)
	})
	// Still up and answering, each hostile answer counted as a failed
	// scrape, and nothing scaled on them.
	failed, err := sfzMetric(ctx, p.MetricsURL, `wva_scale_from_zero_epp_scrapes_total{result="parse"}`)
	require.NoError(t, err, "the process answers /metrics after the hostile answers")
	assert.GreaterOrEqual(t, failed, float64(rounds*len(hostileAnswers)/2), "hostile answers are failed scrapes")
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(0), *d.Spec.Replicas, "no wake-up on a hostile answer")
	skipped, err := sfzMetric(ctx, p.MetricsURL, `wva_scale_from_zero_epp_samples_skipped_total{reason="too_many_labels"}`)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, skipped, float64(rounds), "the 8,000-label sample is skipped and counted, not parsed")
	// deploy/scale-from-zero's limit is 256 Mi; the 300 GiB declaration
	// alone used to exhaust the machine, the gzipped distinct models took
	// 222 MiB of heap.
	peak, err := p.PeakRSS()
	require.NoError(t, err)
	t.Logf("peak resident memory over %d hostile answers: %d MiB", served, peak>>20)
	assert.Less(t, peak, int64(256<<20), "peak resident memory within the pod limit")

	mu.Lock()
	sane = true
	mu.Unlock()
	testenv.Eventually(ctx, t, "the group woken once the EPP answers sensibly", func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return *d.Spec.Replicas == 1, fmt.Sprintf("spec.replicas=%d", *d.Spec.Replicas)
	})
}
