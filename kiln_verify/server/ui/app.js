// The dashboard's entry module: four panels over the public API, nothing else.

import { el, replace } from "./dom.js";
import { EnvironmentPanel } from "./environments.js";
import { RunForm } from "./form.js";
import { HandoffPanel } from "./handoffs.js";
import { RunBoard } from "./runs.js";

const $ = (id) => document.getElementById(id);

const board = new RunBoard($("runs"), $("runs-note"));
new RunForm($("start"), () => board.poll());
new EnvironmentPanel($("environments"));
const handoffs = new HandoffPanel($("adapters"), $("exports"));
board.start();
handoffs.start();
$("handoffs-refresh").addEventListener("click", () => handoffs.refresh());
replace($("origin"), el("code", { text: window.location.origin }));
document.body.dataset.ready = "true";
