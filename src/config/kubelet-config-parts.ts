/**
 * The nested objects of KubeletConfiguration (k8s.io/kubelet/config/v1beta1
 * types.go, plus component-base logging and tracing and core/v1 Taint), as
 * they appear in the config file. Every level is strict.
 */
import * as v from "valibot";
import { bool, describe, duration, int32, int64, obj, opt, str } from "./fields.ts";
import { checkQualifiedName, checkTaintEffect } from "./validators.ts";
import { isQuantity } from "./quantity.ts";

export const KubeletAuthentication = obj({
  x509: opt(obj({ clientCAFile: opt(str()) })),
  webhook: opt(obj({ enabled: opt(bool()), cacheTTL: opt(duration()) })),
  anonymous: opt(obj({ enabled: opt(bool()) })),
});

export const KubeletAuthorization = obj({
  mode: opt(str()),
  webhook: opt(obj({ cacheAuthorizedTTL: opt(duration()), cacheUnauthorizedTTL: opt(duration()) })),
});

const uint32 = () =>
  v.pipe(
    int32(),
    v.minValue(0, (i) => `expected a non-negative integer, got ${describe(i.input)}`),
  );

/** A quantity given as a string ("1Gi") or, as Go's resource.Quantity also accepts, a plain number. */
const quantityValue = () => v.union([v.pipe(v.string(), v.check(isQuantity)), v.pipe(v.number(), v.finite())], (i) => `expected a quantity like "1Gi", got ${describe(i.input)}`);

const outputRouting = () => obj({ splitStream: opt(bool()), infoBufferSize: opt(quantityValue()) });

/**
 * component-base/logs/api/v1 LoggingConfiguration. flushFrequency takes a
 * duration string or, for backwards compatibility, an integer of nanoseconds.
 */
export const LoggingConfiguration = obj({
  format: opt(str()),
  flushFrequency: opt(
    v.union(
      [
        duration(),
        v.pipe(
          int64(),
          v.transform((ns) => ns / 1e6),
        ),
      ],
      (i) => `expected a duration like "5s" or an integer of nanoseconds, got ${describe(i.input)}`,
    ),
  ),
  verbosity: opt(uint32()),
  vmodule: opt(v.array(obj({ filePattern: str(), verbosity: uint32() }))),
  options: opt(obj({ text: opt(outputRouting()), json: opt(outputRouting()) })),
});

/** component-base/tracing/api/v1 TracingConfiguration. */
export const TracingConfiguration = obj({
  endpoint: opt(str()),
  samplingRatePerMillion: opt(int32()),
});

/** core/v1 Taint, for registerWithTaints. */
export const Taint = obj({
  key: v.pipe(
    str(),
    v.check(
      (k) => checkQualifiedName(k) === null,
      (i) => checkQualifiedName(String(i.input)) ?? "invalid key",
    ),
  ),
  value: opt(str()),
  effect: v.pipe(
    str(),
    v.check(
      (e) => checkTaintEffect(e) === null,
      (i) => checkTaintEffect(String(i.input)) ?? "invalid effect",
    ),
  ),
  timeAdded: opt(str()),
});

export const ShutdownGracePeriodByPodPriority = obj({
  priority: int32(),
  shutdownGracePeriodSeconds: int64(),
});

export const MemoryReservation = obj({
  numaNode: int32(),
  limits: v.record(v.string(), quantityValue()),
});

export const MemorySwapConfiguration = obj({ swapBehavior: opt(str()) });

export const CrashLoopBackOffConfig = obj({ maxContainerRestartPeriod: opt(duration()) });

export const UserNamespaces = obj({ idsPerPod: opt(int64()) });

/**
 * bunlet extension: a local checkpoint of the desired pods, so an agent that
 * starts while the API server is unreachable runs them (docs/configuration.md).
 */
export const OfflineAutonomyConfig = obj({ enabled: opt(bool()), maxAge: opt(duration()) });
