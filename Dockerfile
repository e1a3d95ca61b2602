# syntax=docker/dockerfile:1
#
# jetqueue's images, built from the go.work workspace. Every binary is
# static (CGO_ENABLED=0) and lands in /usr/local/bin of a distroless,
# non-root runtime. Targets:
#
#   ingest, admission, preemptor, podsready, scorer   one service each: its
#       ENTRYPOINT and a HEALTHCHECK running `<service> healthcheck`
#   jqctl                                              the CLI
#   jetqueue (the default, last stage)                 every binary, no entrypoint
#
#   docker build -t jetqueue/ingest --target ingest .
#   docker build -t jetqueue .

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
# The workspace's module files first, so the download layer is reused
# until a dependency changes.
COPY go.work go.work.sum ./
COPY libs/go.mod libs/go.sum libs/
COPY cmd/jqctl/go.mod cmd/jqctl/go.sum cmd/jqctl/
COPY services/admission/go.mod services/admission/go.sum services/admission/
COPY services/ingest/go.mod services/ingest/go.sum services/ingest/
COPY services/podsready/go.mod services/podsready/go.sum services/podsready/
COPY services/preemptor/go.mod services/preemptor/go.sum services/preemptor/
COPY services/scorer/go.mod services/scorer/go.sum services/scorer/
COPY e2e/go.mod e2e/go.sum e2e/
COPY deploy/go.mod deploy/go.sum deploy/
# The source of what the binaries are built from (.dockerignore keeps the
# rest of the tree out of the context).
COPY libs/ libs/
COPY cmd/jqctl/ cmd/jqctl/
COPY services/ services/
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    mkdir -p /out && \
    for bin in ingest admission preemptor podsready scorer; do \
      GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags='-s -w' -o /out/$bin ./services/$bin || exit 1; \
    done && \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags='-s -w' -o /out/jqctl ./cmd/jqctl

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
# distroless's nonroot user (65532), numeric so runAsNonRoot can verify it.
USER 65532:65532
WORKDIR /home/nonroot

FROM runtime AS ingest
COPY --from=build /out/ingest /usr/local/bin/ingest
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/ingest", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/ingest"]

FROM runtime AS admission
COPY --from=build /out/admission /usr/local/bin/admission
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/admission", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/admission"]

FROM runtime AS preemptor
COPY --from=build /out/preemptor /usr/local/bin/preemptor
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/preemptor", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/preemptor"]

FROM runtime AS podsready
COPY --from=build /out/podsready /usr/local/bin/podsready
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/podsready", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/podsready"]

FROM runtime AS scorer
COPY --from=build /out/scorer /usr/local/bin/scorer
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/scorer", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/scorer"]

FROM runtime AS jqctl
COPY --from=build /out/jqctl /usr/local/bin/jqctl
ENTRYPOINT ["/usr/local/bin/jqctl"]

FROM runtime AS jetqueue
COPY --from=build /out/ /usr/local/bin/
