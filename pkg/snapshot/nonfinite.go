package snapshot

import (
	"fmt"
	"math"

	yamlv3 "go.yaml.in/yaml/v3"
)

// nonFiniteFields lists the paths of NaN and infinite numbers in a YAML
// document. JSON cannot carry them, so the YAML-to-JSON step fails without
// naming the field; this walk names it.
func nonFiniteFields(data []byte) []string {
	var root yamlv3.Node
	if yamlv3.Unmarshal(data, &root) != nil {
		return nil
	}
	var out []string
	var walk func(n *yamlv3.Node, path string)
	walk = func(n *yamlv3.Node, path string) {
		switch n.Kind {
		case yamlv3.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				if path != "" {
					key = path + "." + key
				}
				walk(n.Content[i+1], key)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yamlv3.ScalarNode:
			var f float64
			if n.ShortTag() == "!!float" && n.Decode(&f) == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
				out = append(out, fmt.Sprintf("%s: %s is not a finite number", path, n.Value))
			}
		}
	}
	walk(&root, "")
	return out
}
