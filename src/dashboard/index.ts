// `tickpool/dashboard`: a live web page of one engine, as a Node request handler to mount where you choose.
export { createDashboard, type DashboardHandler, type DashboardOptions } from './dashboard.js';
