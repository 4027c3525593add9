package app

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/sim/servegen"
	"github.com/wva-project/wva/pkg/sim/trace"
)

type simulateServegenOptions struct {
	data     string
	from     time.Duration
	to       time.Duration
	meanRate float64
	seed     uint64
	output   string
}

func newSimulateServegenCommand() *cobra.Command {
	o := simulateServegenOptions{}
	cmd := &cobra.Command{
		Use:   "servegen --data DIR --mean-rate R -o FILE [--from 0h] [--to 12h] [--seed 1]",
		Short: "Generate a request trace from Alibaba ServeGen's production workload data",
		Long: `Reads one model's directory of ServeGen's data (data/<category>/<model>:
chunk-N-trace.csv, chunk-N-dataset.json per client) and generates the requests
of [--from, --to) as ServeGen's generator does: per client and 600 s window,
Gamma or Weibull inter-arrival times, prompt and output lengths from the
client's token distributions. The aggregate rate of all clients is scaled so
its mean over the span is --mean-rate, keeping its shape. Writes the trace as
CSV (TIMESTAMP in seconds, ContextTokens, GeneratedTokens) for
'wva simulate --trace', gzip-compressed when FILE ends in .gz, and prints a
summary on standard error.`,
		Example: `  wva simulate servegen --data ServeGen/data/language/m-mid --to 12h --mean-rate 12 -o m-mid.csv.gz
  wva simulate --trace m-mid.csv.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateServegen(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", "", "ServeGen model directory (data/<category>/<model>)")
	f.DurationVar(&o.from, "from", 0, "start of the span, from the data's first window")
	f.DurationVar(&o.to, "to", 12*time.Hour, "end of the span (exclusive)")
	f.Float64Var(&o.meanRate, "mean-rate", 0, "mean request rate over the span, requests/s")
	f.Uint64Var(&o.seed, "seed", 1, "random seed")
	f.StringVarP(&o.output, "output", "o", "", "trace file to write (CSV; gzip when it ends in .gz)")
	for _, name := range []string{"data", "mean-rate", "output"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func runSimulateServegen(cmd *cobra.Command, o simulateServegenOptions) error {
	pool, err := servegen.Load(o.data)
	if err != nil {
		return err
	}
	tr, err := servegen.Generate(pool, o.from, o.to, o.meanRate, o.seed)
	if err != nil {
		return err
	}
	if len(tr.Requests) == 0 {
		return fmt.Errorf("no requests in [%v, %v)", o.from, o.to)
	}
	if err := writeTraceFile(o.output, tr); err != nil {
		return err
	}
	st := tr.Stats()
	// The mean over the span asked for, not up to the last arrival.
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d requests over %v, mean %.2f req/s, peak minute %.2f req/s, mean tokens %.0f in / %.0f out\n",
		o.output, st.Requests, o.to-o.from, float64(st.Requests)/(o.to-o.from).Seconds(), st.PeakMinuteRate, st.MeanInputTokens, st.MeanOutputTokens)
	return nil
}

// writeTraceFile writes tr as CSV in the Azure format, TIMESTAMP in seconds
// with millisecond precision (truncated, so no arrival moves into the next
// window), gzip-compressed when the name ends in .gz.
func writeTraceFile(name string, tr trace.Trace) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(name)
		}
	}()
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(name, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	bw := bufio.NewWriter(w)
	if err := writeTraceCSV(bw, tr); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

func writeTraceCSV(w io.Writer, tr trace.Trace) error {
	var line []byte
	if _, err := io.WriteString(w, "TIMESTAMP,ContextTokens,GeneratedTokens\n"); err != nil {
		return err
	}
	for _, r := range tr.Requests {
		if r.Arrival < 0 {
			return errors.New("a request arrives before the trace's start")
		}
		ms := r.Arrival.Milliseconds()
		line = strconv.AppendInt(line[:0], ms/1000, 10)
		line = append(line, '.')
		frac := ms % 1000
		line = append(line, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10), ',')
		line = strconv.AppendInt(line, int64(r.Input), 10)
		line = append(line, ',')
		line = strconv.AppendInt(line, int64(r.Output), 10)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}
