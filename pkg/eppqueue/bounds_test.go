package eppqueue

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

const textType = "text/plain; version=0.0.4"

// labelHeavyLine is one queue sample of model m with n labels in all.
func labelHeavyLine(n int) string {
	var b strings.Builder
	b.WriteString(Metric + `{target_model_name="m"`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `,l%d="v"`, i)
	}
	b.WriteString("} 1\n")
	return b.String()
}

// manyModels is one queue sample per model for n models.
func manyModels(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%s{target_model_name=\"m%d\"} 1\n", Metric, i)
	}
	return b.Bytes()
}

func gzipped(tb testing.TB, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, err := zw.Write(b)
	require.NoError(tb, err)
	require.NoError(tb, zw.Close())
	return out.Bytes()
}

// labelPairs: target_model_name="m" and n-1 more labels.
func labelPairs(n int) [][2]string {
	out := [][2]string{{"target_model_name", "m"}}
	for i := 1; i < n; i++ {
		out = append(out, [2]string{fmt.Sprintf("l%d", i), "v"})
	}
	return out
}

// protoMetric encodes a gauge Metric with labels.
func protoMetric(v float64, labels ...[2]string) []byte {
	var m []byte
	for _, l := range labels {
		var lp []byte
		lp = protowire.AppendTag(lp, lpName, protowire.BytesType)
		lp = protowire.AppendString(lp, l[0])
		lp = protowire.AppendTag(lp, lpValue, protowire.BytesType)
		lp = protowire.AppendString(lp, l[1])
		m = protowire.AppendTag(m, metricLabel, protowire.BytesType)
		m = protowire.AppendBytes(m, lp)
	}
	g := protowire.AppendTag(nil, valueField, protowire.Fixed64Type)
	g = protowire.AppendFixed64(g, math.Float64bits(v))
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	return protowire.AppendBytes(m, g)
}

// protoQueue is one delimited gauge MetricFamily of Metric.
func protoQueue(metrics ...[]byte) []byte {
	return protoFamilyOf(Metric, metrics...)
}

func protoFamilyOf(name string, metrics ...[]byte) []byte {
	f := protowire.AppendTag(nil, famName, protowire.BytesType)
	f = protowire.AppendString(f, name)
	f = protowire.AppendTag(f, famType, protowire.VarintType)
	f = protowire.AppendVarint(f, 1) // GAUGE
	for _, m := range metrics {
		f = protowire.AppendTag(f, famMetric, protowire.BytesType)
		f = protowire.AppendBytes(f, m)
	}
	return protowire.AppendBytes(nil, f)
}

// Bad samples are skipped and counted, in both formats; the rest counts.
func TestParseSkipsBadSamples(t *testing.T) {
	long := strings.Repeat("x", MaxModelBytes+1)
	tests := []struct {
		name    string
		proto   bool
		body    string
		want    Queue
		skipped Skipped
	}{
		{name: "duplicate label", body: Metric + `{target_model_name="a",fairness_id="f",fairness_id="g"} 5` + "\n" + newNameBody,
			want: Queue{"llama": 3, "base": 4}, skipped: Skipped{SkipDuplicateLabel: 1}},
		{name: "too many labels", body: labelHeavyLine(MaxLabels+1) + labelHeavyLine(MaxLabels),
			want: Queue{"m": 1}, skipped: Skipped{SkipTooManyLabels: 1}},
		{name: "model name too long", body: Metric + `{target_model_name="` + long + `"} 5` + "\n" + Metric + `{target_model_name="a"} 1` + "\n",
			want: Queue{"a": 1}, skipped: Skipped{SkipModelTooLong: 1}},
		{name: "syntax errors", body: Metric + "\n" + Metric + `{a="b"}` + "\n" + Metric + `{a="\q"} 1` + "\n" + Metric + `{a="b" c="d"} 1` + "\n" +
			Metric + `{a="b"} 1 notatime` + "\n" + Metric + `{a="b"} 1 2 3` + "\n" + Metric + `{9a="b"} 1` + "\n" + Metric + "{a=\"\xff\"} 1\n" +
			Metric + `{target_model_name="ok"} 1 1700000000000` + "\n",
			want: Queue{"ok": 1}, skipped: Skipped{SkipMalformed: 8}},
		{name: "escapes, quoted label names, trailing comma", body: Metric + `{ "target_model_name" = "a\"b\\c\n" , x="}",} 2` + "\n",
			want: Queue{"a\"b\\c\n": 2}, skipped: Skipped{}},
		{name: "all new-family samples bad: legacy used", body: Metric + `{a="b",a="c"} 1` + "\n" + LegacyMetric + `{model_name="l"} 3` + "\n",
			want: Queue{"l": 3}, skipped: Skipped{SkipDuplicateLabel: 1}},
		{name: "protobuf duplicate label", proto: true,
			body: string(protoQueue(protoMetric(5, [2]string{"target_model_name", "a"}, [2]string{"target_model_name", "b"}), protoMetric(2, [2]string{"model_name", "c"}))),
			want: Queue{"c": 2}, skipped: Skipped{SkipDuplicateLabel: 1}},
		{name: "protobuf too many labels", proto: true,
			body: string(protoQueue(protoMetric(5, labelPairs(MaxLabels+1)...), protoMetric(2, labelPairs(MaxLabels)...))),
			want: Queue{"m": 2}, skipped: Skipped{SkipTooManyLabels: 1}},
		{name: "protobuf metrics with broken labels", proto: true,
			body: string(protoQueue([]byte{0x0a, 0x00}, []byte{0x0a, 0x02, 0xff, 0xff}, protoMetric(2))),
			want: Queue{AnyModel: 2}, skipped: Skipped{SkipMalformed: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := textType
			if tt.proto {
				ct = protoDelimType
			}
			q, skipped, err := Parse(context.Background(), strings.NewReader(tt.body), ct)
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
			assert.Equal(t, tt.skipped, skipped)
		})
	}
}

// Answers beyond the bounds are errors, in both formats.
func TestParseBoundErrors(t *testing.T) {
	metrics := make([][]byte, MaxLineBytes/1000+10)
	for i := range metrics {
		metrics[i] = protoMetric(1, [2]string{"a", strings.Repeat("v", 1000)})
	}
	bigOther := protoFamilyOf("other_family", metrics...)
	bigQueue := protoQueue(metrics...)
	tests := []struct {
		name    string
		proto   bool
		body    []byte
		wantErr string
		want    Queue
	}{
		{name: "text: one model over MaxModels", body: manyModels(MaxModels + 1), wantErr: "has over 2048 models"},
		{name: "text: MaxModels models", body: manyModels(MaxModels), want: func() Queue {
			q := Queue{}
			for i := range MaxModels {
				q[fmt.Sprintf("m%d", i)] = 1
			}
			return q
		}()},
		{name: "protobuf: large message of another family skipped", proto: true, body: append(bigOther, protoQueue(protoMetric(2))...),
			want: Queue{AnyModel: 2}},
		{name: "protobuf: large queue message", proto: true, body: bigQueue, wantErr: "at most 1048576 accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := textType
			if tt.proto {
				ct = protoDelimType
			}
			q, _, err := Parse(context.Background(), bytes.NewReader(tt.body), ct)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
		})
	}
}

// One sample with 8,000 labels (88 KB) costs 5 CPU-seconds and 2.7 GB with
// expfmt's text parser; this parser skips it in linear time.
func TestParseLabelHeavySampleIsCheap(t *testing.T) {
	text := []byte(labelHeavyLine(8000))
	proto := protoQueue(protoMetric(1, labelPairs(8000)...))
	for _, tt := range []struct {
		name, ct string
		body     []byte
	}{{"text", textType, text}, {"protobuf", protoDelimType, proto}} {
		t.Run(tt.name, func(t *testing.T) {
			var skipped Skipped
			start := time.Now()
			allocs := testing.AllocsPerRun(5, func() {
				var err error
				_, skipped, err = Parse(context.Background(), bytes.NewReader(tt.body), tt.ct)
				require.NoError(t, err)
			})
			perRun := time.Since(start) / 6
			assert.Equal(t, Skipped{SkipTooManyLabels: 1}, skipped)
			assert.Less(t, allocs, 30.0, "allocations per parse")
			assert.Less(t, perRun, 50*time.Millisecond)
			t.Logf("%s: %d bytes, %v and %.0f allocations per parse", tt.name, len(tt.body), perRun, allocs)
		})
	}
}

// worstAnswer is the costliest answer within the bounds: MaxModels-1
// models with MaxModelBytes names plus unlabeled samples, a MaxLineBytes
// comment line, and MaxBytes filled with queue samples.
func worstAnswer() []byte {
	var b bytes.Buffer
	b.WriteString("# " + strings.Repeat("c", MaxLineBytes-10) + "\n")
	name := strings.Repeat("n", MaxModelBytes-8)
	for i := 0; b.Len() < MaxBytes-2048; i++ {
		fmt.Fprintf(&b, "%s{target_model_name=\"%s%08d\",fairness_id=\"f\",priority=\"0\"} 1\n", Metric, name, i%(MaxModels-1))
	}
	fmt.Fprintf(&b, "%s 1\n", Metric)
	return b.Bytes()
}

// Memory: the worst answer within bounds allocates a few MiB in all (an
// upper bound on its peak heap), and the 16 MiB answer with 254,139
// models that reached 222 MiB of live heap is refused after MaxModels.
func TestParseMemoryBounded(t *testing.T) {
	var many bytes.Buffer
	for i := 0; many.Len() < MaxBytes-100; i++ {
		fmt.Fprintf(&many, "%s{target_model_name=\"model-%07d\"} 1\n", Metric, i)
	}
	tests := []struct {
		name     string
		body     []byte
		wantErr  string
		maxAlloc uint64
	}{
		{name: "worst answer within bounds", body: worstAnswer(), maxAlloc: 4 << 20},
		{name: "16 MiB of distinct models", body: many.Bytes(), wantErr: "has over 2048 models", maxAlloc: 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, gz := range []bool{false, true} {
				var r io.Reader = bytes.NewReader(tt.body)
				if gz {
					zr, err := gzip.NewReader(bytes.NewReader(gzipped(t, tt.body)))
					require.NoError(t, err)
					r = zr
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				q, _, err := Parse(context.Background(), r, textType)
				runtime.ReadMemStats(&after)
				if tt.wantErr != "" {
					require.Error(t, err)
					assert.Contains(t, err.Error(), tt.wantErr)
				} else {
					require.NoError(t, err)
					assert.Len(t, q, MaxModels)
				}
				alloc := after.TotalAlloc - before.TotalAlloc
				assert.Less(t, alloc, tt.maxAlloc, "bytes allocated (gzip %v)", gz)
				t.Logf("%d-byte answer, gzip %v: %.2f MiB allocated", len(tt.body), gz, float64(alloc)/(1<<20))
			}
		})
	}
}

// ctxReader ends its context after n reads, as a deadline would mid-parse.
type ctxReader struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return c.r.Read(p)
}

// Parsing stops when its context ends, even while the answer keeps coming.
func TestParseStopsAtDeadline(t *testing.T) {
	body := bytes.Repeat([]byte(Metric+`{target_model_name="m",fairness_id="f"} 1`+"\n"), MaxBytes/64)
	for _, ct := range []string{textType, protoDelimType} {
		t.Run(ct, func(t *testing.T) {
			b := body
			if ct == protoDelimType {
				one := protoQueue(protoMetric(1, [2]string{"target_model_name", "m"}))
				b = bytes.Repeat(one, MaxBytes/len(one)-1)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := &countingReader{r: &ctxReader{r: bytes.NewReader(b), n: 3, cancel: cancel}}
			_, _, err := Parse(ctx, r, ct)
			require.Error(t, err)
			assert.True(t, errors.Is(err, context.Canceled), "%v", err)
			assert.Less(t, r.n, int64(len(b)/8), "bytes read before stopping")
		})
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
