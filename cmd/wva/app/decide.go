package app

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/wva-project/wva/examples/snapshots"
	"github.com/wva-project/wva/pkg/snapshot"
)

func newDecideCommand() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "decide [-f SNAPSHOT] [-o json|table]",
		Short: "Decide replicas for one variant group from a snapshot file (offline, no cluster)",
		Long: `Runs the same decision pipeline as the adapter (analyzer, optimizer, enforcer) on a
snapshot of one variant group and prints the analysis and each variant's target.
Without -f it decides the embedded example (examples/snapshots/scale-up.yaml);
"-f -" reads the snapshot from standard input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Errors echo names from the file: escaped and cut like the table.
			return snapshot.DisplayError(decide(cmd, file, output))
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "snapshot file (YAML or JSON), or - for standard input")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: json or table")
	return cmd
}

func decide(cmd *cobra.Command, file, output string) error {
	data, name, err := readInput(cmd.InOrStdin(), file)
	if err != nil {
		return err
	}
	s, err := snapshot.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	out, err := snapshot.Decide(s)
	if err != nil {
		return err
	}
	text, err := snapshot.Render(out, output)
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(text)
	return err
}

func readInput(stdin io.Reader, file string) ([]byte, string, error) {
	switch file {
	case "":
		return snapshots.Default, snapshots.DefaultName, nil
	case "-":
		data, err := io.ReadAll(stdin)
		return data, "standard input", err
	}
	data, err := os.ReadFile(file)
	return data, file, err
}
