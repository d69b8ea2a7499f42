# syntax=docker/dockerfile:1
#
# Wheelhouse server. Without --database-url (WHEELHOUSE_DATABASE_URL) the server runs its own PostgreSQL from
# the image's PostgreSQL binaries, in the data volume; with it, the image's PostgreSQL is simply unused.
#
#   docker build -t wheelhouse \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" --build-arg COMMIT="$(git rev-parse HEAD)" .
#   docker run --rm -p 8080:8080 -v wheelhouse-data:/var/lib/wheelhouse wheelhouse
#
# Arguments after the image name are appended to the entrypoint, e.g. `--log-format json`.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Empty values make the binary report v0.0.0-dev / unknown (see version/).
ARG VERSION=""
ARG COMMIT=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w \
        -X github.com/wheelhouse-dev/wheelhouse/version.Version=${VERSION} \
        -X github.com/wheelhouse-dev/wheelhouse/version.Commit=${COMMIT}" \
      -o /out/wheelhouse ./cmd/wheelhouse
# The node agent for both architectures, served by /platform/v1/agent/binary to machines that join.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    for arch in amd64 arm64; do \
      CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
        -ldflags "-s -w \
          -X github.com/wheelhouse-dev/wheelhouse/version.Version=${VERSION} \
          -X github.com/wheelhouse-dev/wheelhouse/version.Commit=${COMMIT}" \
        -o /out/agents/wheelhouse-linux-$arch ./cmd/wheelhouse || exit 1; \
    done

FROM debian:bookworm-slim
# PostgreSQL server binaries for the embedded default, without the distribution's own cluster: Wheelhouse runs
# its own, in its data directory. tini runs as PID 1: it forwards signals to wheelhouse and reaps orphans.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/wheelhouse.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# A non-root user: PostgreSQL then runs as the same user, and the data directory needs no hand-over.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/wheelhouse --shell /usr/sbin/nologin wheelhouse \
 && install -d -o wheelhouse -g wheelhouse -m 0700 /var/lib/wheelhouse
COPY --from=build /out/wheelhouse /usr/local/bin/wheelhouse
COPY --from=build /out/agents /usr/local/lib/wheelhouse/agents
USER 10001:10001
ENV WHEELHOUSE_DATA_DIR=/var/lib/wheelhouse
VOLUME /var/lib/wheelhouse
EXPOSE 8080
ENV WHEELHOUSE_AGENT_BINARY_DIR=/usr/local/lib/wheelhouse/agents
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/wheelhouse", "server", "--listen", "0.0.0.0:8080"]
