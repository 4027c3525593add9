package snapshot

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDisplayName(t *testing.T) {
	long := strings.Repeat("a", 10<<20)
	cases := []struct {
		name, in, want, quoted string
	}{
		{"plain name as it is", "v1-l4", "v1-l4", `"v1-l4"`},
		{"printable unicode as it is", "modèle/λ", "modèle/λ", `"modèle/λ"`},
		{"escape sequence quoted", "v\x1b[2Jx", `"v\x1b[2Jx"`, `"v\x1b[2Jx"`},
		{"forged row quoted", "v\nforged\t9", `"v\nforged\t9"`, `"v\nforged\t9"`},
		{"right-to-left override quoted", "v\u202ex", `"v\u202ex"`, `"v\u202ex"`},
		{"invalid UTF-8 quoted", "v\xffx", `"v\xffx"`, `"v\xffx"`},
		{"a quote is quoted, so none can be forged", `v"x`, `"v\"x"`, `"v\"x"`},
		{"10 MB cut to 253 bytes", long, strings.Repeat("a", 253) + "…", `"` + strings.Repeat("a", 253) + `"…`},
		{"exactly 253 bytes kept", long[:253], long[:253], `"` + long[:253] + `"`},
		{"cut on a rune boundary", strings.Repeat("é", 200), strings.Repeat("é", 126) + "…", `"` + strings.Repeat("é", 126) + `"…`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DisplayName(tc.in))
			assert.Equal(t, tc.quoted, QuotedName(tc.in))
		})
	}
}

func TestDisplayText(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"printable text as it is", `spare after removing one of 2: KV 0.3 >= 0.1, "quoted" \ kept`, `spare after removing one of 2: KV 0.3 >= 0.1, "quoted" \ kept`},
		{"control characters escaped", "a\x1b[31mb\nc\td\re", `a\x1b[31mb\nc\td\re`},
		{"invalid UTF-8 escaped", "a\xffb", `a\xffb`},
		{"long text cut", strings.Repeat("x", 5000), strings.Repeat("x", maxDisplayText) + "…"},
		{"long text with an escape cut", "\x07" + strings.Repeat("x", 5000), `\a` + strings.Repeat("x", maxDisplayText-1) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DisplayText(tc.in))
		})
	}
}

func TestDisplayError(t *testing.T) {
	assert.NoError(t, DisplayError(nil))
	assert.EqualError(t, DisplayError(errors.New("a: bad\nb: \x1b[2J")), "a: bad\nb: \\x1b[2J", "one line per problem, each escaped")
	many := DisplayError(errors.New(strings.Repeat("bad\n", 500) + "bad"))
	lines := strings.Split(many.Error(), "\n")
	assert.Len(t, lines, maxDisplayLines+1)
	assert.Equal(t, "… and 401 more", lines[maxDisplayLines])
}
