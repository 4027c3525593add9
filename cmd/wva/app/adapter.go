package app

import (
	"context"

	"github.com/spf13/cobra"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/wva-project/wva/pkg/adapter"
	"github.com/wva-project/wva/pkg/config"
)

func newAdapterCommand() *cobra.Command {
	return adapterCommand(func(ctx context.Context, base *basecmd.AdapterBase, opts *adapter.Options) error {
		a, err := adapter.New(base, opts)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	})
}

// adapterCommand builds the command around run, so tests can see the
// options the command line, environment and config file produce.
func adapterCommand(run func(context.Context, *basecmd.AdapterBase, *adapter.Options) error) *cobra.Command {
	opts := adapter.NewOptions()
	base := &basecmd.AdapterBase{Name: "wva-adapter"}
	cmd := &cobra.Command{
		Use:   "adapter --prometheus-url URL [flags]",
		Short: "Serve wva_desired_replicas on external.metrics.k8s.io and run the decision engine",
		Long: `The adapter is an aggregated API server for external.metrics.k8s.io/v1beta1. The elected
leader collects vLLM metrics from Prometheus, decides every variant group and writes the
decision of record into each VariantAutoscaling's status; every replica serves those
decisions as the external metric wva_desired_replicas, selected with
labelSelector variant_name=<VA name>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), base, opts)
		},
	}
	base.FlagSet = cmd.Flags()
	base.InstallFlags()
	opts.AddFlags(cmd.Flags())
	layered(cmd, config.ProgramAdapter, &opts.Pinned)
	return cmd
}
