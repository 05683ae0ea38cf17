/**
 * The payload encoding of the bus: proto3 JSON with proto field names (snake_case),
 * UTF-8. Implicit-presence fields are always written (`"attempt": 0`, `"retrying": false`,
 * `"tools": []`) so that outside subscribers see every field without knowing proto3
 * defaults; unset message fields (`error`, `output`, …) are left out.
 */
import { create, fromJson, fromJsonString, ScalarType, toJson, toJsonString } from "@bufbuild/protobuf";
import type { DescField, DescMessage, JsonValue, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Value } from "@bufbuild/protobuf/wkt";
import { errorMessage } from "@baton/errors";
import { ContractDecodeFailed, ContractEncodeFailed } from "./errors.ts";

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * Encodes a message, or a plain init object (camelCase fields, as for `create`), as the
 * bus payload of `schema`.
 * Field values are checked first, so that nothing is sent that receivers would reject.
 * @throws `BATON_CONTRACTS_ENCODE` (500) when the message cannot be represented, e.g. an
 *   int32 field holding 1.5 or 2^31, a string field holding a number, a `Value` holding NaN.
 */
export function encode<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc> | MessageInitShape<Desc>,
): Uint8Array {
  try {
    const msg = create(schema, message);
    const problem = checkMessage(schema, msg, schema.typeName);
    if (problem !== undefined) throw new Error(problem);
    return utf8Encoder.encode(toJsonString(schema, msg, { useProtoFieldName: true, alwaysEmitImplicit: true }));
  } catch (err) {
    throw ContractEncodeFailed(schema.typeName, errorMessage(err), { cause: err });
  }
}

/**
 * Decodes a bus payload as `schema`. Unknown fields are ignored (newer senders may add
 * fields); both proto names and lowerCamelCase JSON names are accepted.
 * @throws `BATON_CONTRACTS_DECODE` (400, not retryable) when the bytes are not UTF-8,
 *   not JSON, or do not fit the schema.
 */
export function decode<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  let text: string;
  try {
    text = utf8Decoder.decode(bytes);
  } catch (err) {
    throw ContractDecodeFailed(schema.typeName, "payload is not valid UTF-8", { cause: err });
  }
  try {
    return fromJsonString(schema, text, { ignoreUnknownFields: true });
  } catch (err) {
    throw ContractDecodeFailed(schema.typeName, errorMessage(err), { cause: err });
  }
}

/**
 * Converts a plain JSON value to a `google.protobuf.Value` message, for `Value` fields
 * (`NodeCompleted.output`, `ToolResult.output`, …). `Struct` fields need no conversion:
 * protobuf-es v2 types them as plain `JsonObject`.
 * @throws `BATON_CONTRACTS_ENCODE` for values JSON cannot hold (undefined, NaN, Infinity, functions).
 */
export function valueFromJson(json: JsonValue): Value {
  try {
    return fromJson(ValueSchema, json);
  } catch (err) {
    throw ContractEncodeFailed(ValueSchema.typeName, errorMessage(err), { cause: err });
  }
}

/** Converts a `google.protobuf.Value` message back to a plain JSON value; `undefined` when the field is unset. */
export function valueToJson(value: Value | undefined): JsonValue | undefined {
  if (value === undefined || value.kind.case === undefined) return undefined;
  return toJson(ValueSchema, value);
}

/**
 * Converts plain JavaScript data (e.g. a tool's or a handler's result) to a JSON value
 * the way `JSON.stringify` does: `toJSON()` is honoured (Dates become ISO strings),
 * `undefined` properties and functions are dropped, NaN and Infinity become null.
 * Use it before putting data of unknown shape into a `Struct` or `Value` field.
 * @throws `BATON_CONTRACTS_ENCODE` for data JSON cannot hold at all (a BigInt, a cycle, top-level undefined).
 */
export function toJsonValue(data: unknown): JsonValue {
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch (err) {
    throw ContractEncodeFailed("JSON value", errorMessage(err), { cause: err });
  }
  if (text === undefined) throw ContractEncodeFailed("JSON value", `${typeof data} is not JSON`);
  return JSON.parse(text) as JsonValue;
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const UINT32_MAX = 2 ** 32 - 1;

function checkScalar(type: ScalarType, v: unknown): string | undefined {
  switch (type) {
    case ScalarType.STRING:
      return typeof v === "string" ? undefined : "expected a string";
    case ScalarType.BOOL:
      return typeof v === "boolean" ? undefined : "expected a boolean";
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return Number.isInteger(v) && (v as number) >= INT32_MIN && (v as number) <= INT32_MAX
        ? undefined
        : "expected an int32 (an integer from -2^31 to 2^31-1)";
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= UINT32_MAX ? undefined : "expected a uint32";
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return typeof v === "number" ? undefined : "expected a number";
    case ScalarType.BYTES:
      return v instanceof Uint8Array ? undefined : "expected a Uint8Array";
    default:
      return undefined; // 64-bit integers: checked by the JSON writer
  }
}

/** The first problem of a message's field values, as "path: problem"; `undefined` when it is fine. */
function checkMessage(desc: DescMessage, msg: Record<string, unknown>, path: string): string | undefined {
  // Well-known types have their own JSON forms and are checked by the JSON writer.
  if (desc.typeName.startsWith("google.protobuf.")) return undefined;
  for (const field of desc.fields) {
    let value: unknown;
    if (field.oneof !== undefined) {
      const group = msg[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
      if (group?.case !== field.localName) continue;
      value = group.value;
    } else {
      value = msg[field.localName];
    }
    const problem = checkField(field, value, `${path}.${field.name}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function checkField(field: DescField, value: unknown, path: string): string | undefined {
  switch (field.fieldKind) {
    case "scalar": {
      const p = checkScalar(field.scalar, value);
      return p === undefined ? undefined : `${path}: ${p}, got ${describe(value)}`;
    }
    case "enum":
      return Number.isInteger(value) ? undefined : `${path}: expected an enum number, got ${describe(value)}`;
    case "message":
      if (value === undefined) return undefined;
      if (typeof value !== "object" || value === null) return `${path}: expected a message, got ${describe(value)}`;
      if (field.message.typeName === "google.protobuf.Value" && (value as Partial<Value>).kind?.case === undefined) {
        return `${path}: a google.protobuf.Value without a kind (convert plain JSON with valueFromJson)`;
      }
      return checkMessage(field.message, value as Record<string, unknown>, path);
    case "list": {
      if (!Array.isArray(value)) return `${path}: expected an array, got ${describe(value)}`;
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        let p: string | undefined;
        if (field.listKind === "scalar") {
          const sp = checkScalar(field.scalar, item);
          p = sp === undefined ? undefined : `${path}[${i}]: ${sp}, got ${describe(item)}`;
        } else if (field.listKind === "message") {
          p = typeof item === "object" && item !== null
            ? checkMessage(field.message, item as Record<string, unknown>, `${path}[${i}]`)
            : `${path}[${i}]: expected a message, got ${describe(item)}`;
        }
        if (p !== undefined) return p;
      }
      return undefined;
    }
    case "map": {
      if (typeof value !== "object" || value === null) return `${path}: expected an object, got ${describe(value)}`;
      for (const [k, item] of Object.entries(value)) {
        let p: string | undefined;
        if (field.mapKind === "scalar") {
          const sp = checkScalar(field.scalar, item);
          p = sp === undefined ? undefined : `${path}[${k}]: ${sp}, got ${describe(item)}`;
        } else if (field.mapKind === "message") {
          p = typeof item === "object" && item !== null
            ? checkMessage(field.message, item as Record<string, unknown>, `${path}[${k}]`)
            : `${path}[${k}]: expected a message, got ${describe(item)}`;
        }
        if (p !== undefined) return p;
      }
      return undefined;
    }
  }
}

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v == null) return String(v);
  return Array.isArray(v) ? "an array" : `a ${typeof v}`;
}
