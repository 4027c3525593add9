package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplaceBlock(t *testing.T) {
	doc := "intro\n<!-- benchreport:t -->\nold\n<!-- /benchreport:t -->\nrest\n"
	got, err := replaceBlock(doc, "t", "new\n")
	require.NoError(t, err)
	assert.Equal(t, "intro\n<!-- benchreport:t -->\nnew\n<!-- /benchreport:t -->\nrest\n", got)

	_, err = replaceBlock(doc, "missing", "x")
	assert.ErrorContains(t, err, "benchreport:missing")
}

func TestTableOf(t *testing.T) {
	out := "Scenario: x\n\nPOLICY  COST\nwva  1.0\nstatic:1xa  2.0\n  oracle: note\n\nchart\n"
	assert.Equal(t, "POLICY  COST\nwva  1.0\nstatic:1xa  2.0\n  oracle: note\n", tableOf(out))
	assert.Equal(t, "POLICY  COST\nwva  1.0\n  oracle: note\n", withoutFrontier(tableOf(out)))
}
