#!/usr/bin/env bash
# Regenerates the Go code of KEDA's external scaler protocol:
#   pkg/kedascaler/externalscaler/externalscaler{,_grpc}.pb.go
# Needs protoc (Debian: protobuf-compiler); the two Go plugins are installed
# at pinned versions into a temporary GOBIN, so output does not depend on
# whatever happens to be on PATH. CI does not run this: the generated code is
# committed, and this script is how to refresh it after editing the .proto.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12     # google.golang.org/protobuf, as in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2  # google.golang.org/grpc/cmd/protoc-gen-go-grpc

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="pkg/kedascaler/externalscaler"
command -v protoc >/dev/null || { echo "protoc not found; install protobuf-compiler" >&2; exit 1; }

gobin="$(mktemp -d)"
trap 'rm -rf "${gobin}"' EXIT
GOBIN="${gobin}" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
GOBIN="${gobin}" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"

cd "${root}"
PATH="${gobin}:${PATH}" protoc -I "${dir}" \
	--go_out="${dir}" --go_opt=paths=source_relative \
	--go-grpc_out="${dir}" --go-grpc_opt=paths=source_relative \
	"${dir}/externalscaler.proto"
echo "Generated ${dir}/externalscaler.pb.go and ${dir}/externalscaler_grpc.pb.go ($(protoc --version))"
