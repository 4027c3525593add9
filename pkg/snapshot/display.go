package snapshot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Snapshot names (modelID, namespace, variants, pods, accelerators) are
// free text a hostile file controls. Printed raw, escape sequences and
// newlines reach the terminal (forged table rows) and a 10 MB name is
// echoed whole. Everything wva decide prints passes through these.

const (
	// maxDisplayName is the Kubernetes name limit: longer names are cut.
	maxDisplayName = 253
	// maxDisplayText bounds a free-text line (a reason, a summary line),
	// far above any wva writes.
	maxDisplayText = 4096
	// maxDisplayLines bounds the lines of an error (one per problem).
	maxDisplayLines = 100
	ellipsis        = "…"
)

// DisplayError is err's message safe to print: each line as DisplayText,
// at most maxDisplayLines of them.
func DisplayError(err error) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	more := len(lines) - maxDisplayLines
	if more > 0 {
		lines = lines[:maxDisplayLines]
	}
	for i, l := range lines {
		lines[i] = DisplayText(l)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more", more))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// DisplayName is a name safe to print: cut to maxDisplayName bytes, and
// quoted with Go escapes when it holds anything but printable characters
// (or a quote or backslash, so a quoted name cannot be forged).
func DisplayName(s string) string {
	cut, more := truncate(s, maxDisplayName)
	if q := strconv.Quote(cut); q[1:len(q)-1] != cut {
		cut = q
	}
	if more {
		cut += ellipsis
	}
	return cut
}

// QuotedName is DisplayName always in quotes: for messages that quote the
// name (%q) to show where it begins and ends.
func QuotedName(s string) string {
	cut, more := truncate(s, maxDisplayName)
	cut = strconv.Quote(cut)
	if more {
		cut += ellipsis
	}
	return cut
}

// DisplayText is a line of free text safe to print: non-printable
// characters (newlines, tabs, escape, invalid UTF-8) are replaced by Go
// escapes, and the line is cut to maxDisplayText bytes. Printable text is
// returned as it is.
func DisplayText(s string) string {
	cut, more := truncate(s, maxDisplayText)
	if printable(cut) {
		if more {
			cut += ellipsis
		}
		return cut
	}
	var b strings.Builder
	for i := 0; i < len(cut); {
		r, size := utf8.DecodeRuneInString(cut[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, cut[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	if more {
		b.WriteString(ellipsis)
	}
	return b.String()
}

// printable reports whether s is valid UTF-8 of printable characters only.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes on a rune boundary and says whether
// it cut anything.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
