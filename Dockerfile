# Multi-stage image for modelpool-operator and modelpool-router (one image, two binaries; the router's
# Deployment sets its command): build on Debian with the -dev packages, run on a slim Debian with only the
# shared libraries the binaries link, as a non-root user.
# Without a Docker engine: scripts/image-build.sh builds it with podman (test/image checks the result).
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev libmicrohttpd-dev \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY include include
COPY src src
# MP_TESTS=OFF: the two binaries alone, without the test tree or cmocka; CMake's install rule names them.
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DMP_WERROR=ON -DMP_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && cmake --install /build --strip --prefix /install

FROM debian:bookworm-slim
# apt-get clean: the image's size must not depend on whether the base image's apt keeps downloaded packages.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcurl4 libcjson1 libyaml-0-2 libssl3 libmicrohttpd12 ca-certificates \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /install/bin/modelpool-operator /install/bin/modelpool-router /usr/local/bin/
# After the layers above, so a new version or commit rebuilds no layer but this one.
ARG VERSION=0.1.0
ARG SOURCE=""
ARG REVISION=""
LABEL org.opencontainers.image.title="modelpool-operator" \
      org.opencontainers.image.description="Kubernetes operator: InferenceServices sharing one exclusive GPU slot" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# Metrics (--metrics-bind-address) and the health probes (--health-probe-bind-address), as config/manager;
# 8080 is the router's OpenAI API (config/router).
EXPOSE 8080 8443 8081
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/modelpool-operator"]
