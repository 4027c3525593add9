/*
Copyright The WVA Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The structs below mirror the parts of apiextensions.k8s.io/v1
// CustomResourceDefinition that the tests look at, so this package does not
// depend on k8s.io/apiextensions-apiserver.
type crdDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Scope string `json:"scope"`
		Names struct {
			Kind       string   `json:"kind"`
			ListKind   string   `json:"listKind"`
			Plural     string   `json:"plural"`
			Singular   string   `json:"singular"`
			ShortNames []string `json:"shortNames"`
		} `json:"names"`
		Versions []crdVersion `json:"versions"`
	} `json:"spec"`
}

type crdVersion struct {
	Name         string `json:"name"`
	Served       bool   `json:"served"`
	Storage      bool   `json:"storage"`
	Subresources *struct {
		Status *json.RawMessage `json:"status"`
		Scale  *json.RawMessage `json:"scale"`
	} `json:"subresources"`
	AdditionalPrinterColumns []printerColumn `json:"additionalPrinterColumns"`
	Schema                   struct {
		OpenAPIV3Schema *schemaProps `json:"openAPIV3Schema"`
	} `json:"schema"`
}

type printerColumn struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	JSONPath string `json:"jsonPath"`
	Priority int32  `json:"priority"`
}

type schemaProps struct {
	Type         string                 `json:"type"`
	Format       string                 `json:"format"`
	Properties   map[string]schemaProps `json:"properties"`
	Items        *schemaProps           `json:"items"`
	Required     []string               `json:"required"`
	Default      json.RawMessage        `json:"default"`
	Pattern      string                 `json:"pattern"`
	Enum         []string               `json:"enum"`
	Minimum      *float64               `json:"minimum"`
	MinLength    *int64                 `json:"minLength"`
	XValidations []struct {
		Rule    string `json:"rule"`
		Message string `json:"message"`
	} `json:"x-kubernetes-validations"`
	XListType     string   `json:"x-kubernetes-list-type"`
	XListMapKeys  []string `json:"x-kubernetes-list-map-keys"`
	XIntOrString  bool     `json:"x-kubernetes-int-or-string"`
	XPreserveUnkn *bool    `json:"x-kubernetes-preserve-unknown-fields"`
}

const crdFile = "llmd.ai_variantautoscalings.yaml"

func crdPath(t *testing.T) string {
	t.Helper()
	_, thisFile, _, ok := runtime.Caller(0)
	require.True(t, ok)
	// pkg/apis/llmd/v1alpha1 -> repository root.
	return filepath.Join(filepath.Dir(thisFile), "..", "..", "..", "..", "deploy", "crd", crdFile)
}

// loadCRD reads the generated CRD and returns it with its only version.
func loadCRD(t *testing.T) (*crdDoc, crdVersion) {
	t.Helper()
	data, err := os.ReadFile(crdPath(t))
	require.NoError(t, err, "generated CRD missing; run hack/update-codegen.sh")
	var crd crdDoc
	require.NoError(t, yaml.Unmarshal(data, &crd), "decode %s", crdFile)
	require.Len(t, crd.Spec.Versions, 1)
	v := crd.Spec.Versions[0]
	require.NotNil(t, v.Schema.OpenAPIV3Schema, "CRD has no openAPIV3Schema")
	return &crd, v
}

// prop walks the schema along the given property names.
func prop(t *testing.T, s *schemaProps, path ...string) schemaProps {
	t.Helper()
	cur := *s
	for i, p := range path {
		next, ok := cur.Properties[p]
		require.True(t, ok, "schema has no property %v", path[:i+1])
		cur = next
	}
	return cur
}

func TestCRDIdentity(t *testing.T) {
	crd, v := loadCRD(t)
	assert.Equal(t, "apiextensions.k8s.io/v1", crd.APIVersion)
	assert.Equal(t, "CustomResourceDefinition", crd.Kind)
	assert.Equal(t, VariantAutoscalingResource+"."+GroupName, crd.Metadata.Name)
	assert.Equal(t, GroupName, crd.Spec.Group)
	assert.Equal(t, "Namespaced", crd.Spec.Scope)
	assert.Equal(t, VariantAutoscalingKind, crd.Spec.Names.Kind)
	assert.Equal(t, VariantAutoscalingListKind, crd.Spec.Names.ListKind)
	assert.Equal(t, VariantAutoscalingResource, crd.Spec.Names.Plural)
	assert.Equal(t, "variantautoscaling", crd.Spec.Names.Singular)
	assert.Contains(t, crd.Spec.Names.ShortNames, VariantAutoscalingShortName)
	assert.Equal(t, Version, v.Name)
	assert.True(t, v.Served)
	assert.True(t, v.Storage)
}

func TestCRDStatusSubresource(t *testing.T) {
	_, v := loadCRD(t)
	require.NotNil(t, v.Subresources, "no subresources")
	assert.NotNil(t, v.Subresources.Status, "status subresource missing")
	assert.Nil(t, v.Subresources.Scale, "unexpected scale subresource")
}

func TestCRDPrinterColumns(t *testing.T) {
	_, v := loadCRD(t)
	cols := map[string]printerColumn{}
	for _, c := range v.AdditionalPrinterColumns {
		cols[c.Name] = c
	}
	tests := []struct {
		name, typ, path string
	}{
		{"Model", "string", ".spec.modelID"},
		{"Min", "integer", ".spec.minReplicas"},
		{"Max", "integer", ".spec.maxReplicas"},
		{"Current", "integer", ".status.currentReplicas"},
		{"Desired", "integer", ".status.desiredOptimizedAlloc.numReplicas"},
		{"Metrics", "string", `.status.conditions[?(@.type=="MetricsAvailable")].status`},
		{"Reason", "string", ".status.desiredOptimizedAlloc.reason"},
		{"Age", "date", ".metadata.creationTimestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := cols[tc.name]
			require.True(t, ok, "printer column %q missing", tc.name)
			assert.Equal(t, tc.typ, c.Type)
			assert.Equal(t, tc.path, c.JSONPath)
			assert.Zero(t, c.Priority, "shown by a plain kubectl get va")
		})
	}
	assert.Len(t, v.AdditionalPrinterColumns, len(tests))
}

func TestCRDSpecValidation(t *testing.T) {
	_, v := loadCRD(t)
	root := v.Schema.OpenAPIV3Schema
	spec := prop(t, root, "spec")

	assert.Contains(t, root.Required, "spec")
	assert.ElementsMatch(t, []string{"scaleTargetRef", "modelID"}, spec.Required)

	t.Run("CEL min<=max", func(t *testing.T) {
		require.Len(t, spec.XValidations, 1)
		assert.Equal(t, "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas", spec.XValidations[0].Rule)
		assert.Equal(t, "minReplicas must be less than or equal to maxReplicas", spec.XValidations[0].Message)
	})

	t.Run("scaleTargetRef", func(t *testing.T) {
		ref := prop(t, root, "spec", "scaleTargetRef")
		assert.ElementsMatch(t, []string{"kind", "name"}, ref.Required)
		assert.ElementsMatch(t,
			[]string{ScaleTargetKindDeployment, ScaleTargetKindStatefulSet, ScaleTargetKindLeaderWorkerSet},
			prop(t, &ref, "kind").Enum)
		assert.Equal(t, "string", prop(t, &ref, "apiVersion").Type)
		require.NotNil(t, prop(t, &ref, "name").MinLength)
		assert.EqualValues(t, 1, *prop(t, &ref, "name").MinLength)
	})

	t.Run("modelID", func(t *testing.T) {
		m := prop(t, &spec, "modelID")
		assert.Equal(t, "string", m.Type)
		require.NotNil(t, m.MinLength)
		assert.EqualValues(t, 1, *m.MinLength)
	})

	t.Run("defaults and minimums", func(t *testing.T) {
		tests := []struct {
			field       string
			wantDefault string // JSON
			wantMinimum *float64
		}{
			{"minReplicas", "1", float64Ptr(0)},
			{"maxReplicas", "2", float64Ptr(1)},
			{"variantCost", `"10.0"`, nil},
			{"gpusPerReplica", "", float64Ptr(0)},
			{"acceleratorName", "", nil},
		}
		for _, tc := range tests {
			t.Run(tc.field, func(t *testing.T) {
				p := prop(t, &spec, tc.field)
				if tc.wantDefault == "" {
					assert.Empty(t, p.Default)
				} else {
					assert.JSONEq(t, tc.wantDefault, string(p.Default))
				}
				assert.Equal(t, tc.wantMinimum, p.Minimum)
			})
		}
	})

	t.Run("defaults match Go constants", func(t *testing.T) {
		var minR, maxR int32
		var cost string
		require.NoError(t, json.Unmarshal(prop(t, &spec, "minReplicas").Default, &minR))
		require.NoError(t, json.Unmarshal(prop(t, &spec, "maxReplicas").Default, &maxR))
		require.NoError(t, json.Unmarshal(prop(t, &spec, "variantCost").Default, &cost))
		assert.Equal(t, DefaultMinReplicas, minR)
		assert.Equal(t, DefaultMaxReplicas, maxR)
		assert.Equal(t, DefaultVariantCost, cost)
	})

	t.Run("variantCost pattern matches CostValue", func(t *testing.T) {
		p := prop(t, &spec, "variantCost")
		assert.Equal(t, variantCostPattern.String(), p.Pattern)
		// The API server and ParseVariantCost accept the same values.
		crdPattern := regexp.MustCompile(p.Pattern)
		for _, s := range []string{"0", "10.0", "007.50", "999999.999999", "1000000", "1000000.00", "0001000000",
			"1000000.5", "1000000.0001", "1000001", "9999999", "123456789.125", "1" + strings.Repeat("0", 308), "-1", "1e3", ".5"} {
			v, err := ParseVariantCost(s)
			assert.Equal(t, crdPattern.MatchString(s), err == nil, "%s: %v", s, err)
			assert.LessOrEqual(t, v, MaxVariantCost, s)
		}
	})

	t.Run("gpuMemoryPerReplica is a quantity", func(t *testing.T) {
		p := prop(t, &spec, "gpuMemoryPerReplica")
		assert.True(t, p.XIntOrString)
	})
}

func TestCRDStatusSchema(t *testing.T) {
	_, v := loadCRD(t)
	root := v.Schema.OpenAPIV3Schema

	alloc := prop(t, root, "status", "desiredOptimizedAlloc")
	for _, f := range []string{"numReplicas", "reason", "accelerator", "lastRunTime", "lastUpdate"} {
		assert.Contains(t, alloc.Properties, f)
	}
	assert.Equal(t, "date-time", prop(t, &alloc, "lastRunTime").Format)
	assert.Equal(t, "date-time", prop(t, &alloc, "lastUpdate").Format)
	assert.Empty(t, alloc.Required, "status fields should be optional")

	assert.Equal(t, "integer", prop(t, root, "status", "currentReplicas").Type)
	assert.Equal(t, "boolean", prop(t, root, "status", "actuation", "applied").Type)

	conds := prop(t, root, "status", "conditions")
	assert.Equal(t, "array", conds.Type)
	assert.Equal(t, "map", conds.XListType)
	assert.Equal(t, []string{"type"}, conds.XListMapKeys)
	require.NotNil(t, conds.Items)
	assert.Contains(t, conds.Items.Required, "type")
}

func float64Ptr(v float64) *float64 { return &v }
