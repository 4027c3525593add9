# Multi-stage build: a static wva binary on a distroless non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/wva-project/wva/pkg/version.Version=${VERSION} -X github.com/wva-project/wva/pkg/version.Commit=${COMMIT}" \
    -o /out/wva ./cmd/wva

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/wva /usr/local/bin/wva
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/wva"]
