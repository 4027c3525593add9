// Package app wires wva's subcommands; the work happens in pkg/.
package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/version"
)

// NewRootCommand returns the `wva` command with every subcommand.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "wva",
		Short:         "Autoscaler for LLM inference variants, driving stock Kubernetes HPAs",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(newAdapterCommand(), newControllerCommand(), newDecideCommand(), newScaleFromZeroCommand(), newSimulateCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String())
			return err
		},
	}
}
