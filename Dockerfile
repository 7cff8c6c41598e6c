# Multi-stage image for modelpool-operator: build on Debian with the -dev packages, run on a slim
# Debian with only the shared libraries the binary links, as a non-root user.
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev libcmocka-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY include include
COPY src src
COPY test test
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DMP_WERROR=ON \
 && cmake --build /build -j"$(nproc)" --target modelpool-operator \
 && strip /build/modelpool-operator

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcurl4 libcjson1 libyaml-0-2 libssl3 libmicrohttpd12 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/modelpool-operator /usr/local/bin/modelpool-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/modelpool-operator"]
