package app

import (
	"github.com/spf13/cobra"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/config"
	"github.com/wva-project/wva/pkg/scalefromzero"
)

func newScaleFromZeroCommand() *cobra.Command {
	opts := scalefromzero.NewOptions()
	cmd := &cobra.Command{
		Use:   "scale-from-zero [--epp-selector SELECTOR | --epp-url URL] [--activator-listen ADDR] [flags]",
		Short: "Bring variant groups at zero replicas back to one as soon as requests queue for them",
		Long: `Watches every VariantAutoscaling group (namespace + modelID) whose scale targets are all at
zero replicas and, every --poll-interval, reads the EPP flow-control queue of those models
straight from the EPPs' /metrics: by default the EPP Service each InferencePool
(inference.networking.k8s.io/v1) names in spec.endpointPickerRef, for the groups whose pods
the pool selects; --epp-selector or --epp-url override that discovery. When requests are queued it annotates the cheapest VA
that fits the GPU budget with ` + llmdv1alpha1.AnnotationScaledFromZeroAt + `, then scales its
target to 1 through the scale subresource and records an Event. The optional activator is an
OpenAI-compatible proxy that holds requests while a model wakes, for setups without an EPP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return scalefromzero.Run(cmd.Context(), opts)
		},
	}
	opts.AddFlags(cmd.Flags())
	layered(cmd, config.ProgramScaleFromZero, nil)
	return cmd
}
