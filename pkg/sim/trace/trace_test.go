package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    []Request
		wantErr string // substring; the line and column must be named
	}{
		{
			name: "azure format, relative arrivals",
			csv: "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
				"2023-11-16 18:15:46.6805900,374,44\n" +
				"2023-11-16 18:15:50.9951690,396,109\n",
			want: []Request{{0, 374, 44}, {4314579000, 396, 109}},
		},
		{
			name: "numeric seconds, unsorted, header case and spaces, zero output counts as one",
			csv:  "timestamp, contexttokens ,GENERATEDTOKENS\n10.5,100,0\n2,50,5\n\n",
			want: []Request{{0, 50, 5}, {8500 * time.Millisecond, 100, 1}},
		},
		{
			name:    "empty file",
			csv:     "",
			wantErr: "line 1: empty trace",
		},
		{
			name:    "header only",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n",
			wantErr: "line 2: trace has a header but no requests",
		},
		{
			name:    "wrong header column",
			csv:     "TIMESTAMP,Prompt,GeneratedTokens\n1,2,3\n",
			wantErr: `line 1, column 2 (header): column is "Prompt", want "ContextTokens"`,
		},
		{
			name:    "bad timestamp",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\nyesterday,2,3\n",
			wantErr: `line 3, column 1 (TIMESTAMP): "yesterday" is neither a date-time`,
		},
		{
			name:    "negative tokens",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,-2,3\n",
			wantErr: `line 2, column 2 (ContextTokens): "-2" is not an integer in [0, 10000000]`,
		},
		{
			name:    "non-numeric output",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,2,3\n3,4,x\n",
			wantErr: `line 4, column 3 (GeneratedTokens): "x" is not an integer`,
		},
		{
			name:    "missing column",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\n",
			wantErr: "line 2: has 2 columns, want 3",
		},
		{
			name: "limits are inclusive: second 0 and exactly 31 days later",
			csv:  "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,1\n2678400,1,1\n",
			want: []Request{{0, 1, 1}, {MaxSpan, 1, 1}},
		},
		{
			name:    "seconds past int64 nanoseconds (used to panic the oracle)",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n9.3e9,2,3\n",
			wantErr: `line 3, column 1 (TIMESTAMP): "9.3e9" is not a number of seconds in [0, 4102444800]`,
		},
		{
			name:    "seconds past the limit",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n4102444801,2,3\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "4102444801" is not a number of seconds in [0, 4102444800]`,
		},
		{
			name:    "negative seconds",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n-1,2,3\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "-1" is not a number of seconds`,
		},
		{
			name:    "NaN seconds",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\nNaN,2,3\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "NaN" is not a number of seconds`,
		},
		{
			name:    "infinite seconds",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n+Inf,2,3\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "+Inf" is not a number of seconds`,
		},
		{
			name:    "seconds beyond float64",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1e400,2,3\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "1e400" is not a number of seconds`,
		},
		{
			name:    "date-time past 2100",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2300-01-01 00:00:00,1,1\n",
			wantErr: `line 3, column 1 (TIMESTAMP): "2300-01-01 00:00:00" is outside 1970-01-01 to 2100-01-01`,
		},
		{
			name:    "date-time before 1970",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1969-12-31T23:59:59Z,1,1\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "1969-12-31T23:59:59Z" is outside 1970-01-01 to 2100-01-01`,
		},
		{
			name: "span of centuries (used to exhaust memory)",
			csv: "TIMESTAMP,ContextTokens,GeneratedTokens\n2099-12-31 00:00:00,1,1\n" +
				"1970-01-02 00:00:00,1,1\n2023-11-16 18:15:46,1,1\n",
			wantErr: `line 2, column 1 (TIMESTAMP): the trace spans 1139520h0m0s from the earliest request (line 3) to this one; at most 744h0m0s (31 days) is accepted`,
		},
		{
			name:    "span one second over 31 days",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n5,1,1\n2678406,1,1\n",
			wantErr: `line 3, column 1 (TIMESTAMP): the trace spans 744h0m1s from the earliest request (line 2)`,
		},
		{
			name:    "huge timestamp field is cut in the error",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n" + strings.Repeat("9", 100000) + ",1,1\n",
			wantErr: `line 2, column 1 (TIMESTAMP): "` + strings.Repeat("9", 64) + `"... (100000 bytes) is not a number of seconds`,
		},
		{
			name:    "huge token field is cut in the error",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,1," + strings.Repeat("x", 100000) + "\n",
			wantErr: `line 2, column 3 (GeneratedTokens): "` + strings.Repeat("x", 64) + `"... (100000 bytes) is not an integer`,
		},
		{
			name:    "huge header field is cut in the error",
			csv:     "TIMESTAMP," + strings.Repeat("y", 5000) + ",GeneratedTokens\n1,1,1\n",
			wantErr: `line 1, column 2 (header): column is "` + strings.Repeat("y", 64) + `"... (5000 bytes)`,
		},
		{
			name:    "bare quote",
			csv:     "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\"x,3\n",
			wantErr: "line 2, column 4 (csv)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Parse(strings.NewReader(tt.csv), "t")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Less(t, len(err.Error()), 400, "a bad field is not echoed whole")
				var te *Error
				assert.True(t, errors.As(err, &te), "error is a *trace.Error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, tr.Requests)
		})
	}
}

func TestReshape(t *testing.T) {
	tr := Trace{Name: "t"}
	for i := range 1000 {
		tr.Requests = append(tr.Requests, Request{Arrival: time.Duration(i) * time.Second, Input: 10, Output: 2})
	}
	half, err := tr.Reshape(0.5, 1, 0, 1)
	require.NoError(t, err)
	assert.Len(t, half.Requests, 1000)
	assert.Equal(t, 999*time.Second/2, half.Duration())

	double, err := tr.Reshape(1, 2.5, 0, 1)
	require.NoError(t, err)
	assert.InDelta(t, 2500, len(double.Requests), 60)
	for i := 1; i < len(double.Requests); i++ {
		require.LessOrEqual(t, double.Requests[i-1].Arrival, double.Requests[i].Arrival, "sorted")
	}
	again, _ := tr.Reshape(1, 2.5, 0, 1)
	assert.Equal(t, double.Requests, again.Requests, "deterministic for a seed")

	thin, err := tr.Reshape(1, 0.3, 0, 1)
	require.NoError(t, err)
	assert.InDelta(t, 300, len(thin.Requests), 60)

	_, err = tr.Reshape(3000, 1, 0, 1)
	assert.ErrorContains(t, err, "time scale 3000 stretches the trace's 16m39s to 34.7 days: at most 744h0m0s (31 days) is accepted")
	for _, scale := range []float64{3000, 1e300} {
		// Truncated to an hour, any stretch is fine, and no arrival overflows.
		long, err := tr.Reshape(scale, 1, time.Hour, 1)
		require.NoError(t, err, scale)
		require.NotEmpty(t, long.Requests)
		for _, r := range long.Requests {
			require.True(t, r.Arrival >= 0 && r.Arrival <= time.Hour, "arrival %v", r.Arrival)
		}
	}

	cut, err := tr.Reshape(1, 1, 100*time.Second, 1)
	require.NoError(t, err)
	assert.Len(t, cut.Requests, 101)

	_, err = tr.Reshape(0, 1, 0, 1)
	assert.ErrorContains(t, err, "time scale 0")
	_, err = tr.Reshape(1, -1, 0, 1)
	assert.ErrorContains(t, err, "rate scale -1")
}

// TestAzureTraces parses the Azure traces shipped in examples/traces,
// which the docs and hack/benchreport run.
func TestAzureTraces(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "traces")
	for _, name := range []string{"azure-llm-inference-2023-code.csv", "azure-llm-inference-2023-conv.csv"} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		tr, err := Parse(f, name)
		f.Close()
		require.NoError(t, err, name)
		st := tr.Stats()
		assert.Greater(t, st.Requests, 5000, name)
		assert.InDelta(t, time.Hour.Minutes(), st.Duration.Minutes(), 5, name)
	}
}

// TestServegenTraces parses the gzip-compressed ServeGen traces shipped in
// examples/traces: twelve hours each, at their mean rates.
func TestServegenTraces(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "traces")
	for name, rate := range map[string]float64{"servegen-m-mid-00-12h.csv.gz": 12, "servegen-deepseek-r1-00-12h.csv.gz": 1.5} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		tr, err := Parse(f, name)
		f.Close()
		require.NoError(t, err, name)
		st := tr.Stats()
		assert.InDelta(t, 12*time.Hour.Hours(), st.Duration.Hours(), 0.01, name)
		assert.InDelta(t, rate, st.MeanRate, rate*0.01, name)
	}
}

// FuzzParseTrace: any file either fails with a *trace.Error naming a line,
// in an error of bounded size, or yields a sorted trace within the limits
// that the simulation can bucket per minute.
func FuzzParseTrace(f *testing.F) {
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
	f.Add("timestamp, contexttokens ,GENERATEDTOKENS\n10.5,100,0\n2,50,5\n\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n9.3e9,2,3\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n4000000000,2,3\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n1e400,2,3\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2\"x,3\n")
	f.Add("\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\n2300-01-01T00:00:00Z,1,1\n")
	f.Add(string(gzipped(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n0.5,10,2\n1.25,20,3\n")))
	f.Add(string(gzipped(f, "TIMESTAMP,ContextTokens,GeneratedTokens\n0.5,10,2\n")[:30]))
	f.Fuzz(func(t *testing.T, text string) {
		tr, err := Parse(strings.NewReader(text), "fuzz")
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.Line < 1 {
				t.Fatalf("error does not name a line: %v", err)
			}
			if len(err.Error()) > 512 {
				t.Fatalf("error of %d bytes echoes too much", len(err.Error()))
			}
			return
		}
		prev := time.Duration(0)
		for i, r := range tr.Requests {
			if r.Arrival < prev || r.Arrival > MaxSpan {
				t.Fatalf("request %d arrives at %v (previous %v)", i, r.Arrival, prev)
			}
			if r.Input < 0 || r.Input > MaxTokens || r.Output < 1 || r.Output > MaxTokens {
				t.Fatalf("request %d tokens %d/%d", i, r.Input, r.Output)
			}
			prev = r.Arrival
		}
		_ = tr.Stats()
		if _, err := tr.Reshape(1, 1, 0, 1); err != nil {
			t.Fatalf("a parsed trace does not reshape: %v", err)
		}
	})
}

// TestRequestBound: a trace of more than MaxRequests rows, or one that
// rate scaling would make that long, is refused before it is held.
func TestRequestBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	for i := range MaxRequests + 1 {
		b.WriteString(strconv.Itoa(i%3600) + ",1,1\n")
	}
	_, err := Parse(strings.NewReader(b.String()), "long")
	assert.ErrorContains(t, err, "line 1000002: more than 1000000 requests: at most 1000000 are accepted")

	tr := Trace{Name: "t"}
	for i := range 2000 {
		tr.Requests = append(tr.Requests, Request{Arrival: time.Duration(i) * time.Second, Input: 10, Output: 2})
	}
	_, err = tr.Reshape(1, MaxRateScale, 0, 1)
	assert.ErrorContains(t, err, "rate scale 1000 makes 2000000 requests of the trace's 2000: at most 1000000 are accepted")
	// Cut to its first 100 s, the same scale is fine.
	cut, err := tr.Reshape(1, MaxRateScale, 100*time.Second, 1)
	require.NoError(t, err)
	assert.Greater(t, len(cut.Requests), 90_000)
}

func gzipped(t testing.TB, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := io.WriteString(zw, text)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// TestParseGzip: gzip input (by its magic bytes) parses like the plain text;
// a corrupt or truncated stream fails naming a line.
func TestParseGzip(t *testing.T) {
	const text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2.5,10,2\n1.25,20,0\n"
	plain, err := Parse(strings.NewReader(text), "t")
	require.NoError(t, err)
	require.Len(t, plain.Requests, 2)
	z := gzipped(t, text)
	for _, tc := range []struct {
		name  string
		input []byte
		want  string // error; empty: parses like the plain text
	}{
		{"gzip", z, ""},
		{"two gzip members", append(gzipped(t, text[:45]), gzipped(t, text[45:])...), ""},
		{"truncated", z[:len(z)-6], "line 4: reading: unexpected EOF"},
		{"corrupt checksum", append(append([]byte{}, z[:len(z)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), "line 4: reading: gzip: invalid checksum"},
		{"magic bytes only", []byte{0x1f, 0x8b}, "line 1: gzip: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse(bytes.NewReader(tc.input), "t")
			if tc.want != "" {
				var te *Error
				require.ErrorAs(t, err, &te)
				assert.EqualError(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, plain, tr)
		})
	}
}

// TestParseBounds: a gzip bomb stops at the row bound or at MaxBytes
// decompressed, whichever it reaches first, before it is held.
func TestParseBounds(t *testing.T) {
	// Gzip members concatenate into one stream: a small bomb is built
	// without compressing its whole size.
	bomb := func(head string, body []byte, copies int) []byte {
		out := gzipped(t, head)
		member := gzipped(t, string(body))
		for range copies {
			out = append(out, member...)
		}
		return out
	}
	const header = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	rows := bomb(header, bytes.Repeat([]byte("1,1,1\n"), 1<<16), MaxRequests/(1<<16)+1)
	long := bomb(header+"1,1,", bytes.Repeat([]byte("0"), 1<<20), MaxBytes>>20+1)
	blanks := bomb(header, bytes.Repeat([]byte("\n"), 1<<20), MaxBytes>>20+1)
	for _, tc := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"a million rows", rows, "line 1000002: more than 1000000 requests: at most 1000000 are accepted"},
		{"one endless field", long, "line 2: the trace is larger than 128 MiB (after decompression): at most 1000000 requests are accepted"},
		{"endless blank lines", blanks, "line 2: the trace is larger than 128 MiB (after decompression): at most 1000000 requests are accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Less(t, len(tc.input), 2<<20, "the bomb is small compressed")
			_, err := Parse(bytes.NewReader(tc.input), "bomb")
			var te *Error
			require.ErrorAs(t, err, &te)
			assert.EqualError(t, err, tc.want)
		})
	}
	// Parse allows MaxBytes + 1: a trace of exactly MaxBytes reads to its end.
	for _, n := range []int{5, 6} {
		_, err := io.ReadAll(&boundedReader{r: strings.NewReader(strings.Repeat("x", n)), left: 5 + 1})
		if n == 5 {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, errTooLarge)
		}
	}
}
