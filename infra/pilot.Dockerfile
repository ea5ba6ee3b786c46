# syntax=docker/dockerfile:1
#
# The pilot image (sortie-pilot): the entrypoint of every Fargate task and EKS Job.
# Build from the repository root (the context is the Cargo workspace):
#
#   docker buildx build --platform linux/amd64 -f infra/pilot.Dockerfile \
#     -t <account>.dkr.ecr.<region>.amazonaws.com/sortie-runner:<tag> --push .
#
# Use --platform linux/arm64 for RunnerArchitecture=ARM64 (infra/target-account.yaml).
# infra/pilot.Dockerfile.dockerignore keeps target/, .git and .tools out of the context.
# Upgrading Terraform or OpenTofu: change the version and both checksums, taken
# from the release's SHA256SUMS file after verifying its signature.
#
# Stages: builder (static musl sortie-pilot), tools (terraform and tofu,
# checksums verified), and the final alpine image with git, as a non-root user.
#
# More Terraform or OpenTofu versions, for jobs whose environment or runner asks for a
# `tool` or a `version` ("1.5.7", "~> 1.5", ">= 1.3, < 1.6"): put each binary in
# /opt/sortie/tools (SORTIE_TOOLS_DIR) named terraform-X.Y.Z or tofu-X.Y.Z. The pilot
# takes a version from the name (and checks the chosen binary's own `version` output),
# identifies /usr/local/bin/terraform and tofu by running them, runs the highest version
# that matches, and fails the job at once, naming every version it has, when none does.
# A job that asks for neither runs tofu (else terraform) from PATH. For example, in the
# tools stage, download and verify another release as above, then
#   unzip -o -d /extra "terraform_1.5.7_linux_${arch}.zip" terraform
#   mv /extra/terraform /extra/terraform-1.5.7
# and in the final stage
#   COPY --from=tools /extra/ /opt/sortie/tools/

ARG RUST_VERSION=1.95.0
ARG ALPINE_VERSION=3.23

# ---------------------------------------------------------------- builder
FROM rust:${RUST_VERSION}-alpine${ALPINE_VERSION} AS builder
# hadolint ignore=DL3018
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
# On alpine the host target is *-unknown-linux-musl, so the binary is static.
RUN cargo build --release --locked -p sortie-pilot --bin sortie-pilot \
    && install -m 0755 target/release/sortie-pilot /sortie-pilot

# ---------------------------------------------------------------- tools
FROM alpine:${ALPINE_VERSION} AS tools
ARG TARGETARCH
ARG TERRAFORM_VERSION=1.9.8
ARG TERRAFORM_SHA256_AMD64=186e0145f5e5f2eb97cbd785bc78f21bae4ef15119349f6ad4fa535b83b10df8
ARG TERRAFORM_SHA256_ARM64=f85868798834558239f6148834884008f2722548f84034c9b0f62934b2d73ebb
ARG TOFU_VERSION=1.8.5
ARG TOFU_SHA256_AMD64=e2951ba6be8ae9427aabbd5c6f243855e8b526cb2ae6bc33a05dae22d7e82632
ARG TOFU_SHA256_ARM64=2535e8d4979806cbf79a1b704dccf1fae45b4d50ccaee3e54c1771044db4a573
# hadolint ignore=DL3018
RUN apk add --no-cache curl unzip
WORKDIR /dl
SHELL ["/bin/ash", "-eo", "pipefail", "-c"]
RUN arch="${TARGETARCH:-amd64}"; \
    case "$arch" in \
      amd64) tf_sum="$TERRAFORM_SHA256_AMD64"; tofu_sum="$TOFU_SHA256_AMD64" ;; \
      arm64) tf_sum="$TERRAFORM_SHA256_ARM64"; tofu_sum="$TOFU_SHA256_ARM64" ;; \
      *) echo "unsupported architecture: $arch" >&2; exit 1 ;; \
    esac; \
    tf_zip="terraform_${TERRAFORM_VERSION}_linux_${arch}.zip"; \
    tofu_zip="tofu_${TOFU_VERSION}_linux_${arch}.zip"; \
    curl -fsSLo "$tf_zip" "https://releases.hashicorp.com/terraform/${TERRAFORM_VERSION}/${tf_zip}"; \
    curl -fsSLo "$tofu_zip" "https://github.com/opentofu/opentofu/releases/download/v${TOFU_VERSION}/${tofu_zip}"; \
    printf '%s  %s\n%s  %s\n' "$tf_sum" "$tf_zip" "$tofu_sum" "$tofu_zip" > SHA256SUMS; \
    sha256sum -c SHA256SUMS; \
    mkdir -p /out; \
    unzip -o -d /out "$tf_zip" terraform; \
    unzip -o -d /out "$tofu_zip" tofu; \
    /out/terraform version; \
    /out/tofu version

# ---------------------------------------------------------------- pilot
FROM alpine:${ALPINE_VERSION}
# git fetches job sources; openssh-client serves ssh:// git urls.
# hadolint ignore=DL3018
RUN apk add --no-cache git ca-certificates openssh-client \
    && addgroup -S -g 10001 sortie \
    && adduser -S -D -H -u 10001 -G sortie -h /work -s /sbin/nologin sortie \
    && mkdir -p /work /opt/sortie/tools \
    && chown 10001:10001 /work \
    && chmod 0700 /work
COPY --from=tools /out/terraform /usr/local/bin/terraform
COPY --from=tools /out/tofu /usr/local/bin/tofu
COPY --from=builder /sortie-pilot /usr/local/bin/sortie-pilot
# The task's root filesystem is read-only: /work and /tmp are writable volumes
# (see infra/target-account.yaml), created here so they start owned by the user.
ENV HOME=/work \
    TMPDIR=/tmp \
    SORTIE_TOOLS_DIR=/opt/sortie/tools \
    TF_IN_AUTOMATION=1 \
    CHECKPOINT_DISABLE=1
USER 10001:10001
WORKDIR /work
# A batch task, not a service: ECS and Kubernetes watch its exit code, not a health check.
# checkov:skip=CKV_DOCKER_2: a run-to-completion job has no health endpoint; its exit code is the outcome
ENTRYPOINT ["/usr/local/bin/sortie-pilot"]
