package app

import (
	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/controller"
)

func newControllerCommand() *cobra.Command {
	opts := controller.NewOptions()
	cmd := &cobra.Command{
		Use:   "controller [flags]",
		Short: "Keep one HPA per VariantAutoscaling aligned and own what an HPA cannot do",
		Long: `The companion controller creates and repairs one autoscaling/v2 HPA per VariantAutoscaling
(External metric wva_desired_replicas, selector variant_name=<VA>, target AverageValue 1,
min/max from the VA, zero tolerance where supported). Where the cluster's HPA cannot scale
to zero, or cannot set its tolerance, it scales the target itself through the scale
subresource, only on a fresh decision of record.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return controller.Run(cmd.Context(), opts)
		},
	}
	opts.AddFlags(cmd.Flags())
	layered(cmd, config.ProgramController, nil)
	return cmd
}
