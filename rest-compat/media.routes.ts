import type { Request } from 'express';
import { Router } from 'express';
import busboy from 'busboy';
import type { Services } from '../src/services.js';
import { DomainError, invalid } from '../src/shared/errors.js';
import { MAX_AUDIO_BYTES } from '../src/modules/proxy/audio-probe.js';
import type { MediaKind, MultipartBody, UploadedFile } from '../src/modules/proxy/media-format.js';
import { queryUserOf, route } from './http.js';
import { serveMetered } from './metered.js';

/** What one multipart route reads at most (docs/reference.md §22, docs/proxy.md "Uploads"). */
export interface UploadLimits {
  /** Bytes of one file. */
  fileBytes: number;
  files: number;
  /** Bytes of the whole body (files, fields and multipart framing). */
  totalBytes: number;
}

const FIELD_BYTES = 64 * 1024;
const MAX_FIELDS = 50;
/** Audio: one file of OpenAI's 25 MB. */
const AUDIO_LIMITS: UploadLimits = {
  fileBytes: MAX_AUDIO_BYTES,
  files: 1,
  totalBytes: MAX_AUDIO_BYTES + 1024 * 1024,
};
/** Image edits: up to 16 images and a mask, 25 MB each, 64 MB in all. */
const EDIT_LIMITS: UploadLimits = { fileBytes: 25 * 1024 * 1024, files: 17, totalBytes: 64 * 1024 * 1024 };

const tooLarge = (what: string) =>
  new DomainError('request_too_large', `request body exceeds ${what}`, null, 'request_too_large');

/**
 * Reads a `multipart/form-data` body with busboy (streaming): fields and files, each file kept in
 * memory only up to its limit and the whole body up to `totalBytes`; past a limit the upload is
 * refused with a 413 and the rest is not read. A body announced larger than the limit is refused
 * before a byte of it is read. Runs after the API key was checked: an unauthenticated client's body
 * is never read (src/app.ts closes the connection).
 */
export function readMultipart(req: Request, limits: UploadLimits): Promise<MultipartBody> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type))
    return Promise.reject(invalid('this route takes multipart/form-data', null, 'invalid_body'));
  const announced = Number(req.headers['content-length']);
  if (Number.isFinite(announced) && announced > limits.totalBytes)
    return Promise.reject(tooLarge(`${limits.totalBytes} bytes`));
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        limits: {
          fileSize: limits.fileBytes,
          files: limits.files,
          fields: MAX_FIELDS,
          fieldSize: FIELD_BYTES,
          parts: MAX_FIELDS + limits.files,
        },
      });
    } catch {
      return reject(invalid('the multipart body is malformed (no boundary)', null, 'invalid_body'));
    }
    const fields: [string, string][] = [];
    const files: UploadedFile[] = [];
    let total = 0;
    let failed = false;
    const fail = (e: DomainError) => {
      if (failed) return;
      failed = true;
      req.unpipe(bb);
      req.resume(); // drained, not kept
      reject(e);
    };
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > limits.totalBytes) fail(tooLarge(`${limits.totalBytes} bytes`));
    });
    // A client that goes away mid-upload: the body never ends, so busboy would never close and the parts
    // read so far (up to the limits above) would be kept for as long as the process lives.
    req.on('close', () => {
      if (!req.complete) fail(invalid('the upload was cut off before its end', null, 'invalid_body'));
    });
    bb.on('field', (name, value, info) => {
      if (info.valueTruncated) return fail(tooLarge(`${FIELD_BYTES} bytes in field '${name}'`));
      fields.push([name, value]);
    });
    bb.on('file', (field, stream, info) => {
      const parts: Buffer[] = [];
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('limit', () => fail(tooLarge(`${limits.fileBytes} bytes in file '${field}'`)));
      // A body that ends inside a file (a truncated upload) fails the file's stream as well as busboy:
      // without a listener that error would be thrown out of the process.
      stream.on('error', () => fail(invalid('the multipart body is malformed', null, 'invalid_body')));
      stream.on('close', () => {
        if (failed) return;
        files.push({
          field,
          filename: info.filename ?? field,
          mimeType: info.mimeType,
          bytes: Buffer.concat(parts),
        });
      });
    });
    bb.on('filesLimit', () =>
      fail(invalid(`at most ${limits.files} files can be sent`, null, 'invalid_body')),
    );
    bb.on('fieldsLimit', () =>
      fail(invalid(`at most ${MAX_FIELDS} fields can be sent`, null, 'invalid_body')),
    );
    bb.on('partsLimit', () => fail(invalid('too many parts in the multipart body', null, 'invalid_body')));
    bb.on('error', () => fail(invalid('the multipart body is malformed', null, 'invalid_body')));
    bb.on('close', () => {
      if (!failed) resolve({ multipart: true, fields, files });
    });
    req.pipe(bb);
  });
}

/**
 * POST /v1/images/generations, /v1/images/edits, /v1/audio/transcriptions, /v1/audio/translations and
 * /v1/audio/speech (and their /v1/u/{user}/… forms), docs/reference.md §22: the JSON ones as parsed by
 * the /v1 JSON parser, the multipart ones read here; each goes through the one metered handler
 * (metered.ts), the same user identification and payment rules as chat.
 */
export function mediaRoutes(services: Services): Router {
  const r = Router();
  const serve = (kind: MediaKind, limits?: UploadLimits) =>
    route(async (req, res) => {
      const body = limits ? await readMultipart(req, limits) : req.body;
      const q = req.query.user;
      await serveMetered(
        services.proxy,
        {
          kind,
          paywall: req.paywall!,
          headers: req.headers,
          queryUser: queryUserOf(q),
          pathUser: req.pathUser,
          body,
          userKey: req.userKey,
        },
        res,
      );
    });
  r.post('/images/generations', serve('image_generations'));
  r.post('/images/edits', serve('image_edits', EDIT_LIMITS));
  r.post('/audio/transcriptions', serve('transcriptions', AUDIO_LIMITS));
  r.post('/audio/translations', serve('translations', AUDIO_LIMITS));
  r.post('/audio/speech', serve('speech'));
  return r;
}
