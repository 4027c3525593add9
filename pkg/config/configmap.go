package config

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	llmdv1alpha1 "github.com/wva-project/wva/pkg/apis/llmd/v1alpha1"
)

// ErrUnlabeled is returned for a ConfigMap of a watched name without the
// label upstream WVA requires; its entries are not read.
var ErrUnlabeled = errors.New("ConfigMap ignored: it lacks the label " +
	llmdv1alpha1.LabelConfigMapName + "=" + llmdv1alpha1.ConfigMapLabelValue +
	" (add it: kubectl label configmap <name> " + llmdv1alpha1.LabelConfigMapName + "=" + llmdv1alpha1.ConfigMapLabelValue + ")")

// Labeled reports whether a ConfigMap carries the label wva requires.
func Labeled(labels map[string]string) bool {
	return labels[llmdv1alpha1.LabelConfigMapName] == llmdv1alpha1.ConfigMapLabelValue
}

// ApplyConfigMap applies one of the watched ConfigMaps: the global one when
// it is in configNamespace, else the namespace-local one of its namespace.
// An unlabeled ConfigMap is not read (and one that lost its label is
// forgotten): the error is ErrUnlabeled.
func (s *Store) ApplyConfigMap(configNamespace string, cm *corev1.ConfigMap) error {
	if !IsConfigMapName(cm.Name) {
		return fmt.Errorf("unknown ConfigMap %q", cm.Name)
	}
	if !Labeled(cm.Labels) {
		s.RemoveConfigMap(configNamespace, cm)
		return ErrUnlabeled
	}
	if cm.Namespace == configNamespace {
		return s.Apply(cm.Name, cm.Data)
	}
	return s.ApplyNamespace(cm.Namespace, cm.Name, cm.Data)
}

// RemoveConfigMap forgets a deleted (or unlabeled) watched ConfigMap.
func (s *Store) RemoveConfigMap(configNamespace string, cm *corev1.ConfigMap) {
	if cm.Namespace == configNamespace {
		s.Remove(cm.Name)
		return
	}
	s.RemoveNamespace(cm.Namespace, cm.Name)
}
