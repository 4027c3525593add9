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

// Package generated holds the typed Go client of the llmd.ai API group,
// generated from pkg/apis by hack/update-codegen.sh (k8s.io/code-generator's
// client-gen, lister-gen and informer-gen):
//
//   - clientset/versioned: the clientset (versioned.NewForConfig), with
//     clientset/versioned/fake for tests.
//   - listers: listers over informer caches.
//   - informers/externalversions: the shared informer factory
//     (externalversions.NewSharedInformerFactory).
//
// Those three directories are wholly generated: do not edit them, and put
// nothing hand-written inside them (hack/verify-codegen.sh fails on any
// difference). This file and the tests beside it are hand-written.
package generated
