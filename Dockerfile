# koord: one image for every component (`koord scheduler`, `koord descheduler`, `koord koordlet`,
# `koord manager`, `koord device-daemon`): the chart runs it with `command: [koord]` and the component as
# its first argument.
#
#   make image                         buildah, on Debian bookworm bases made by mmdebstrap (no registry);
#                                      see tools/image/build.sh and docs/image.md
#   docker build -t koord:0.1.0 .      where debian:bookworm-slim can be pulled (podman build works too)
#
# Both ways give the same layout: bookworm's Python 3.11 (/usr/bin/python3), koord and its dependencies in
# the virtual environment /opt/koord (on PATH), user 65532, entrypoint `koord`.
#
# The builder stage turns the framework, every family library under libs/, every plugin under plugins/ and
# native/ (koord-native: its cffi extension is compiled here, into a wheel) and their dependencies into
# wheels, and installs them into /opt/koord. The runtime stage copies /opt/koord onto a base with nothing
# but Python: no pip, no compiler, no headers. New libraries and plugins are picked up by the globs.

ARG BASE=docker.io/library/debian:bookworm-slim
ARG BUILD_BASE=${BASE}

FROM ${BUILD_BASE} AS builder
COPY tools/image/packages.sh /usr/local/sbin/koord-packages
RUN koord-packages install build
# The package index settings of the machine that builds (tools/image/build.sh passes `pip config list`).
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_CERT
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# Build backends once, then no build isolation: one environment instead of one per distribution.
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install -q "setuptools>=68" wheel "cffi>=1.16"
WORKDIR /src
COPY . .
# The framework with its `kube` extra: every component in the image talks to a real API server.
RUN /opt/build/bin/pip wheel -q --no-build-isolation --wheel-dir /wheels ".[kube]" libs/*/ plugins/*/ \
 && if [ -f native/pyproject.toml ]; then \
      /opt/build/bin/pip wheel -q --no-build-isolation --no-deps --wheel-dir /wheels ./native \
      || echo "koord-native not built: the image runs without it (Resctrl reports unsupported)"; \
    fi
# pip compiles the modules as it installs them: the image's user cannot write bytecode at run time. The
# methods dataclasses compile at start-up are kept the same way (koord_framework/codecache.py).
RUN python3 -m venv --without-pip /opt/koord \
 && /opt/build/bin/pip --python /opt/koord/bin/python install -q --no-index --find-links /wheels /wheels/*.whl \
 && /opt/koord/bin/python -m koord_framework.cli.codecache -q

FROM ${BASE}
LABEL org.opencontainers.image.title="koord" \
      org.opencontainers.image.description="Koordinator's QoS-aware co-location scheduling as a Python plugin platform"
COPY tools/image/packages.sh /usr/local/sbin/koord-packages
RUN koord-packages install runtime && rm /usr/local/sbin/koord-packages
COPY --from=builder /opt/koord /opt/koord
ENV PATH=/opt/koord/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN koord --version && koord plugins list >/dev/null
# The scheduler, descheduler and manager need no privileges; the chart's koordlet DaemonSet runs the same
# image as root (runAsUser: 0) to write cgroups and resctrl on its node.
USER 65532:65532
WORKDIR /
ENTRYPOINT ["koord"]
CMD ["--help"]
