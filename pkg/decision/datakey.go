package decision

import (
	"fmt"
	"hash/fnv"
	"regexp"
)

var invalidKeyChars = regexp.MustCompile(`[^-._a-zA-Z0-9]+`)

// DataKey is a ConfigMap data key for namespace/name: readable, restricted
// to the characters a key allows, and made unique by a hash of the full
// name. Every ConfigMap wva persists per group or variant keys by it.
func DataKey(namespace, name string) string {
	n := invalidKeyChars.ReplaceAllString(namespace+"."+name, "-")
	if len(n) > 200 {
		n = n[:200]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return fmt.Sprintf("%s-%08x", n, h.Sum32())
}
