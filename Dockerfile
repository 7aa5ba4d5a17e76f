# The operator's image for those who build with Docker (or any OCI builder):
#   docker build -t mcp-operator/manager:dev --build-arg VERSION=$(git describe --always) .
# `make images` builds the same image without Docker (hack/mkimage): the static
# manager binary at /manager and the stdio adapter's own at /stdio-adapter
# (stdio server pods copy it in), run as the non-root user 65532, /tmp writable.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/mcp-operator/mcp-operator/internal/version.Version=${VERSION}" \
      -o /out/manager ./cmd/manager \
 && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/mcp-operator/mcp-operator/internal/version.Version=${VERSION}" \
      -o /out/stdio-adapter ./cmd/stdio-adapter \
 && mkdir -p /out/etc /out/tmp && chmod 1777 /out/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/manager"]
