# koord: one image for every component (`koord scheduler`, `koord descheduler`, `koord koordlet`).
#
#   docker build -t koord:0.1.0 .
#
# The builder stage turns the framework, every family library under libs/, every plugin under plugins/ (and
# native/, when present) and their dependencies into wheels; the runtime stage installs only those wheels,
# with no index and no compiler. New libraries and plugins are picked up by the globs, without editing this
# file.

FROM python:3.11 AS builder
WORKDIR /src
COPY . .
RUN python -m pip install --no-cache-dir --upgrade pip \
 && python -m pip wheel --no-cache-dir --wheel-dir /wheels . libs/*/ plugins/*/ $(test -f native/pyproject.toml && echo native)

FROM python:3.11-slim
LABEL org.opencontainers.image.title="koord" \
      org.opencontainers.image.description="Koordinator's QoS-aware co-location scheduling as a Python plugin platform"
COPY --from=builder /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index /wheels/*.whl \
 && rm -rf /wheels \
 && koord plugins list
# The scheduler and descheduler need no privileges; the koordlet DaemonSet runs as root (runAsUser: 0) to
# write cgroups and resctrl on its node.
USER 65532:65532
ENTRYPOINT ["koord"]
CMD ["--help"]
