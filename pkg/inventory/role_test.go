package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
	"github.com/wva-project/wva/pkg/decision"
)

func TestRoleOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   decision.Role
	}{
		{nil, decision.RoleBoth},
		{map[string]string{"app": "x"}, decision.RoleBoth},
		{map[string]string{llmdv1alpha1.LabelRole: "prefill"}, decision.RolePrefill},
		{map[string]string{llmdv1alpha1.LabelRole: "decode"}, decision.RoleDecode},
		{map[string]string{llmdv1alpha1.LabelRole: "Decode"}, decision.RoleDecode},
		{map[string]string{llmdv1alpha1.LabelRole: "both"}, decision.RoleBoth},
		{map[string]string{llmdv1alpha1.LabelRole: "prefil"}, decision.RoleBoth},
	} {
		assert.Equal(t, tc.want, RoleOf(tc.labels), "%v", tc.labels)
	}
}
