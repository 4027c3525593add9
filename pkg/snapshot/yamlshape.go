package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"
)

// plainTags are the YAML tags a snapshot may carry; the YAML-to-JSON step
// silently drops any other (a custom "!tag" would vanish unnoticed).
var plainTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
	"!!map": true, "!!seq": true, "!!timestamp": true, "!!merge": true,
}

// checkYAMLShape rejects what the strict decoder lets through: a second
// document (it would be ignored) and tags outside plainTags. Syntax errors
// are left for the decoder to report.
func checkYAMLShape(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var errs []error
	for doc := 0; ; doc++ {
		var root yamlv3.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil
		}
		if doc > 0 {
			if len(root.Content) == 0 || (root.Content[0].Kind == yamlv3.ScalarNode && root.Content[0].ShortTag() == "!!null") {
				continue // a trailing "---" with nothing after it
			}
			return fmt.Errorf("a second YAML document starts at line %d: a snapshot is one document", root.Line)
		}
		walkYAML(&root, "", func(n *yamlv3.Node, path string) {
			if n.Kind == yamlv3.AliasNode || n.Kind == yamlv3.DocumentNode {
				return
			}
			if tag := n.ShortTag(); !plainTags[tag] {
				if path == "" {
					path = "(document)"
				}
				errs = append(errs, fmt.Errorf("%s: tag %s (line %d) is not accepted: use plain YAML values", path, quote(n.Tag), n.Line))
			}
		})
	}
	return errors.Join(errs...)
}

// walkYAML calls fn on every node with its path (a.b[2].c).
func walkYAML(n *yamlv3.Node, path string, fn func(*yamlv3.Node, string)) {
	fn(n, path)
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			walkYAML(c, path, fn)
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := quote(n.Content[i].Value)
			if path != "" {
				key = path + "." + key
			}
			walkYAML(n.Content[i], key, fn)
			walkYAML(n.Content[i+1], key, fn)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			walkYAML(c, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// quote cuts a key or tag to 64 bytes for an error message.
func quote(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
