package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wva-project/wva/pkg/sim"
	"github.com/wva-project/wva/pkg/sim/oracle"
	"github.com/wva-project/wva/pkg/sim/policies"
	"github.com/wva-project/wva/pkg/sim/scenario"
	"github.com/wva-project/wva/pkg/sim/simtest"
)

func TestRender(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 15*time.Minute, 1.5, 5)
	rep, err := sim.Run(sc, tr, sim.Options{})
	require.NoError(t, err)
	var text, html stringsBuilder
	require.NoError(t, RenderText(&text, rep))
	for _, want := range []string{"POLICY", "x ORACLE", "wva-v1", "queue-threshold", "kpa", "static-peak", "static:", "oracle", "Replicas (all variants)", "W wva", "k kpa"} {
		assert.Contains(t, text.String(), want)
	}
	require.NoError(t, RenderHTML(&html, rep))
	out := html.String()
	assert.Contains(t, out, "<svg")
	assert.Contains(t, out, "TTFT p99")
	assert.NotContains(t, out, "<script")
	for _, external := range []string{"src=", "href=", "<link", "@import"} {
		assert.NotContains(t, out, external, "no external resources")
	}
	assert.Contains(t, out, `xmlns="http://www.w3.org/2000/svg"`)
	for _, p := range rep.Policies {
		if !oracle.IsFrontierRow(p.Policy) { // names with '+', escaped as &#43;
			assert.Contains(t, out, "</span> "+p.Policy+"</td>", "table row of %s", p.Policy)
		}
	}
}

// TestRenderHTMLEscapes renders names from user files that carry markup:
// they show as text, never as elements.
func TestRenderHTMLEscapes(t *testing.T) {
	sc, tr := simtest.ShortScenario(t, scenario.ShapeSpike, 10*time.Minute, 1, 5)
	rep, err := sim.Run(sc, tr, sim.Options{Policies: []string{policies.PolicyWVA, policies.PolicyKPA}})
	require.NoError(t, err)
	rep.Scenario = `chat & "bursts"`
	rep.Policies[0].Policy = "<script>alert(1)</script>"
	rep.Policies[1].Note = "<img onerror=x>"
	rep.Variants[0].Name = "<b>l40s</b>"
	var html stringsBuilder
	require.NoError(t, RenderHTML(&html, rep))
	out := html.String()
	for _, raw := range []string{"<script", "<img", "<b>"} {
		assert.NotContains(t, out, raw)
	}
	for _, escaped := range []string{
		"<h1>wva simulate: chat &amp; &#34;bursts&#34;</h1>",
		"</span> &lt;script&gt;alert(1)&lt;/script&gt;</td>",
		`<div class="note">kpa: &lt;img onerror=x&gt;</div>`,
		"</span> &lt;b&gt;l40s&lt;/b&gt; (",
		">&lt;script&gt;alert(1)&lt;/script&gt;: replicas (spec) per variant, stacked</text>",
	} {
		assert.Contains(t, out, escaped)
	}
}

type stringsBuilder struct{ b []byte }

func (s *stringsBuilder) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }
func (s *stringsBuilder) String() string              { return string(s.b) }
