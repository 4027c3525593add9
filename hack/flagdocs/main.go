// Command flagdocs rewrites the flag tables of README.md and docs/*.md from
// wva's cobra commands (between <!-- BEGIN GENERATED FLAGS: wva <command> -->
// and <!-- END GENERATED FLAGS -->), or with -check fails when a committed
// table is stale or a command with flags has none.
//
// Run from the repository root: go run ./hack/flagdocs [-check]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wva-project/wva/hack/flagdocs/flagdoc"
)

func main() {
	check := flag.Bool("check", false, "fail when a committed table differs from the generated one instead of rewriting it")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "flagdocs:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	paths, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		return err
	}
	paths = append([]string{"README.md"}, paths...)
	docs := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("%v (run from the repository root)", err)
		}
		docs[p] = string(b)
	}
	root := flagdoc.Root()
	if check {
		if problems := flagdoc.Check(docs, root); len(problems) > 0 {
			return fmt.Errorf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
		}
		return nil
	}
	for _, p := range paths {
		text, _, err := flagdoc.Update(docs[p], root)
		if err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		if text != docs[p] {
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				return err
			}
			docs[p] = text
			fmt.Println("updated", p)
		}
	}
	// What is left is a command without a table: where its table goes in
	// the prose is the writer's choice, so it is reported, not invented.
	if problems := flagdoc.Check(docs, root); len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return nil
}
