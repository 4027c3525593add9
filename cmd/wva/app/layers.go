package app

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/pkg/config"
)

// layered adds --config-file to a long-running program and, once cobra has
// parsed the command line, fills every flag not given there from its
// WVA_<FLAG> variable, else from the file's program section (config.Load).
// pins, when not nil, receives the ConfigMap keys the file and the WVA_*
// key variables pin.
func layered(cmd *cobra.Command, program string, pins *config.Pinned) {
	cmd.Flags().String(config.ConfigFileFlag, "",
		"YAML file of settings under the command line and WVA_* variables, over the ConfigMaps: sections saturation and scaleToZero "+
			"(keys of the ConfigMaps' default entries, pinned for every model) and adapter, controller, scaleFromZero (each program's flags by name); env WVA_CONFIG_FILE")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		p, err := config.Load(program, cmd.Flags(), os.LookupEnv, os.ReadFile)
		if err != nil {
			return err
		}
		if pins != nil {
			*pins = p
		}
		return nil
	}
}
