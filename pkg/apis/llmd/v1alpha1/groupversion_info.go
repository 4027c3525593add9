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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the VariantAutoscaling resource.
	GroupName = "llmd.ai"
	// Version is the API version served by this package.
	Version = "v1alpha1"

	// VariantAutoscalingKind is the kind of the VariantAutoscaling resource.
	VariantAutoscalingKind = "VariantAutoscaling"
	// VariantAutoscalingListKind is the kind of a list of VariantAutoscalings.
	VariantAutoscalingListKind = "VariantAutoscalingList"
	// VariantAutoscalingResource is the plural resource name of VariantAutoscaling.
	VariantAutoscalingResource = "variantautoscalings"
	// VariantAutoscalingShortName is the kubectl short name of VariantAutoscaling.
	VariantAutoscalingShortName = "va"
)

var (
	// SchemeGroupVersion is the group/version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

	// GroupVersion is an alias of SchemeGroupVersion, kept for parity with
	// kubebuilder-style API packages.
	GroupVersion = SchemeGroupVersion

	// VariantAutoscalingGVK is the fully qualified kind of VariantAutoscaling.
	VariantAutoscalingGVK = SchemeGroupVersion.WithKind(VariantAutoscalingKind)

	// VariantAutoscalingGVR is the fully qualified resource of VariantAutoscaling.
	VariantAutoscalingGVR = SchemeGroupVersion.WithResource(VariantAutoscalingResource)

	// SchemeBuilder collects the functions that add this group's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this group's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind takes an unqualified kind and returns the group-qualified kind.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource takes an unqualified resource and returns the group-qualified
// resource (the signature expected by client-gen/lister-gen output).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&VariantAutoscaling{},
		&VariantAutoscalingList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
